"""Helion's own autotuner vs ``autotune search`` on Helion kernels, and the drop-in's per-call cost (GPU).

    python -m bench helion_side_by_side [--kernels rms_norm,matmul,softmax] [--shapes 2] \\
        [--efforts full,quick] [--parts helion,ours,history,retime,dropin] [--out DIR]

Parts, each kernel x shape, each in a fresh process with fresh caches (HELION_CACHE_DIR, TRITON_CACHE_DIR,
TORCHINDUCTOR_CACHE_DIR in a new temporary folder), each writing its JSON as soon as it finishes:

- ``helion``: ``bound.autotune(args, force=True)`` at ``autotune_effort`` full and quick: wall seconds of
  the process (import included, as for ours) and the config it found;
- ``ours``: ``autotune search FILE --shape S`` (the default rule, an empty database): wall seconds and best;
- ``history``: ``autotune search`` of the kernel's other shape into the database that already holds the
  first shape's trials (what transfer gives a second shape);
- ``retime``: Helion's best (each effort) and ours re-timed in one process, interleaved, by the same
  L2-flushed Kineto timer (``bench_kineto``, by the generated kernel's name): the kernel-time ratio;
- ``dropin``: host seconds per call of ``autotune.runtime.helion.kernel`` (after its first call) vs a plain
  ``@helion.kernel(config=...)`` with the same config, small inputs (the wrapper's cost, not the GPU's).

Targets (issue 44): ours within 1 % of Helion full's kernel time, in <= 1/10 of its wall time cold and
<= 1/50 with history; the drop-in <= 1 us per call over plain Helion. Full-effort Helion may take ~10 min
per kernel-shape: choose the parts, kernels, shapes and efforts by flags. Results:
``OUT/helion_side_by_side/*.json``, one file per part and kernel-shape, and ``summary.json``."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KERNELS = {
    "rms_norm": ROOT / "examples" / "helion_rms_norm.py",
    "matmul": ROOT / "examples" / "helion_matmul.py",
    "softmax": ROOT / "data" / "kernels" / "helion_softmax.py",
}
PARTS = ("helion", "ours", "history", "retime", "dropin")


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench helion_side_by_side", description=__doc__.split("\n")[0]
    )
    p.add_argument("--kernels", default="rms_norm,matmul,softmax", help=f"of {', '.join(KERNELS)}")
    p.add_argument("--shapes", type=int, default=2, help="the first N default shapes of each kernel")
    p.add_argument(
        "--shape",
        action="append",
        default=[],
        help="M=..,N=..: these shapes instead (repeatable; all kernels)",
    )
    p.add_argument("--efforts", default="full,quick", help="Helion's autotune_effort values to run")
    p.add_argument("--parts", default=",".join(PARTS), help=f"of {', '.join(PARTS)}")
    p.add_argument("--out", default=os.environ.get("OUT") or ".out/bench")
    p.add_argument("--device", default="cuda")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per child process")
    p.add_argument("--calls", type=int, default=20000, help="dropin: calls per round")
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    return p.parse_args(argv)


# ---------------------------------------------------------------------- children (fresh processes)


def _device() -> str:
    """The device every process of a run uses (``--device``; cpu: a smoke run under TRITON_INTERPRET=1)."""
    return os.environ.get("HELION_BENCH_DEVICE", "cuda")


def _sync() -> None:
    if _device().startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _kernel(name: str) -> Any:
    from autotune.kernel.contract import load_kernel_file

    return load_kernel_file(KERNELS[name]).kernel


def _time_config(k: Any, inputs: tuple[Any, ...], bound: Any, config: Any, num_tests: int = 30) -> float:
    """Seconds per call of ``config`` by our timer (the generated Triton kernel by name)."""
    from autotune.bench import bench_kineto_detailed
    from autotune.kernel.helion import launcher

    compiled = bound.compile_config(config, allow_print=False)
    launch = launcher(compiled, inputs, k.kernel_names[0])  # on a CPU: a profiler range of that name
    device = "cpu" if _device() == "cpu" else "cuda"
    return bench_kineto_detailed(
        launch, k.kernel_names, num_tests=num_tests, suppress_kineto_output=True, device=device
    ).per_call_s


def child_helion(kernel: str, shape: dict[str, int], effort: str) -> dict[str, Any]:
    """Helion's autotuner at ``effort`` on one shape (this process is fresh; the caller times it)."""
    import helion

    k = _kernel(kernel)
    inputs = tuple(k.make_inputs(shape, _device()))
    tuner = helion.kernel(k.fn.fn, autotune_effort=effort, static_shapes=True)
    bound = tuner.bind(inputs)
    t0 = time.perf_counter()
    config = bound.autotune(inputs, force=True)
    search_s = time.perf_counter() - t0
    return {
        "config": dict(config.config),
        "search_s": search_s,
        "time_s": _time_config(k, inputs, bound, config),
    }


def child_retime(
    kernel: str, shape: dict[str, int], configs: dict[str, Any], rounds: int = 5
) -> dict[str, Any]:
    """Every named config (a Helion dict, or our flat dict under a name starting with "ours") re-timed
    interleaved for ``rounds`` rounds: the median per name."""
    import statistics

    import helion

    from autotune.kernel.helion import generation, helion_config

    k = _kernel(kernel)
    inputs = tuple(k.make_inputs(shape, _device()))
    bound = k.fn.bind(inputs)
    gen = generation(bound)
    as_helion = {
        n: helion_config(c, gen) if n.startswith("ours") else helion.Config(**c) for n, c in configs.items()
    }
    times: dict[str, list[float]] = {n: [] for n in configs}
    for _ in range(rounds):
        for n, c in as_helion.items():
            times[n].append(_time_config(k, inputs, bound, c))
    return {n: {"median_s": statistics.median(t), "samples_s": t} for n, t in times.items()}


def child_dropin(kernel: str, shape: dict[str, int], config: dict[str, Any], calls: int) -> dict[str, Any]:
    """Host seconds per call: plain ``@helion.kernel(config=...)`` vs the drop-in, both running the config
    the database answers, least of 5 rounds of ``calls`` calls each, synchronised at the end of each round.
    Two cases: the tuned shape (an exact answer; on a GPU this loop may be bound by the kernel itself) and
    a small shape (each dimension at most ``DISPATCH_DIM``: a nearest answer, host-bound, so the row shows
    the dispatch cost, and the drop-in's clock read while a nearest answer waits for a better one)."""
    out: dict[str, Any] = {}
    small = {d: min(v, DISPATCH_DIM) for d, v in shape.items()}
    for case, s in (("tuned_shape", shape), ("small_shape", small)):
        out[case] = _dropin_case(kernel, s, config["db"], calls)
    return out


#: the small shape's dimensions in the drop-in's dispatch measurement
DISPATCH_DIM = 128


def _dropin_case(kernel: str, shape: dict[str, int], db: str, calls: int) -> dict[str, Any]:
    import helion

    from autotune.runtime import helion as tuned

    k = _kernel(kernel)
    inputs = tuple(k.make_inputs(shape, _device()))
    names = list(k.shape_params)
    served = tuned.kernel(
        k.fn.fn,
        kernel=k.name,
        shape=lambda *a: dict(zip(names, _dims(k, a), strict=True)),
        db=db,
        static_shapes=True,
    )
    served(*inputs)  # its choice, made once, is what the plain kernel is given
    plain = helion.kernel(k.fn.fn, config=served.last_config, static_shapes=True)

    def per_call(f: Any) -> float:
        f(*inputs)
        _sync()
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(calls):
                f(*inputs)
            _sync()
            best = min(best, (time.perf_counter() - t0) / calls)
        return best

    row = {"shape": shape, "source": served.last_source, "config": dict(served.last_config.config)}
    row |= {"plain_s": per_call(plain), "dropin_s": per_call(served)}
    row["overhead_s"] = row["dropin_s"] - row["plain_s"]
    return row


def _dims(k: Any, args: tuple[Any, ...]) -> tuple[int, ...]:
    """The call's shape in ``shape_params`` order: the examples' convention (x is M x K / M x N, y K x N)."""
    x = args[0]
    if k.shape_params == ("M", "N", "K"):
        return (x.shape[0], args[1].shape[1], x.shape[1])
    return tuple(x.shape)


def _run_child(argv: list[str]) -> int:
    what, kernel, shape_text, out = argv[0], argv[1], argv[2], Path(argv[-1])
    shape = json.loads(shape_text)
    if what == "helion":
        result = child_helion(kernel, shape, argv[3])
    elif what == "retime":
        result = child_retime(kernel, shape, json.loads(argv[3]))
    else:
        result = child_dropin(kernel, shape, json.loads(argv[3]), int(argv[4]))
    out.write_text(json.dumps(result, indent=2, default=str))
    return 0


# ---------------------------------------------------------------------- the driver


class Run:
    """One benchmark run: where results go, and how each fresh process is started."""

    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.dir = Path(a.out) / "helion_side_by_side"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.rows: list[dict[str, Any]] = []

    def fresh_env(self) -> dict[str, str]:
        cache = tempfile.mkdtemp(prefix="helion_bench_")
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, "PYTHONPATH": path, "TRITON_CACHE_DIR": f"{cache}/triton"}
        env.setdefault("AUTOTUNE_LOOKUP_TIMEOUT", "30")  # the drop-in's first lookup waits for its file
        env |= {"HELION_CACHE_DIR": f"{cache}/helion", "TORCHINDUCTOR_CACHE_DIR": f"{cache}/inductor"}
        env.pop("AUTOTUNE_DB", None)
        return env

    def process(self, cmd: list[str]) -> tuple[int, float, str]:
        t0 = time.perf_counter()
        proc = subprocess.run(
            cmd, env=self.fresh_env(), cwd=ROOT, capture_output=True, text=True, timeout=self.a.timeout
        )
        return proc.returncode, time.perf_counter() - t0, (proc.stdout + proc.stderr)[-3000:]

    def child(self, name: str, *args: str) -> tuple[dict[str, Any] | None, float, str]:
        out = self.dir / f"{name}.child.json"
        rc, wall, tail = self.process(
            [sys.executable, "-m", "bench.helion_side_by_side", "--child", *args, str(out)]
        )
        return (json.loads(out.read_text()) if rc == 0 and out.exists() else None), wall, tail

    def save(self, name: str, row: dict[str, Any]) -> dict[str, Any]:
        row = {"name": name, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **row}
        (self.dir / f"{name}.json").write_text(json.dumps(row, indent=2, default=str))
        self.rows.append(row)
        print(f"{name}: {_brief(row)}", flush=True)
        return row

    def search(self, kernel: str, shape: dict[str, int], db: str, tag: str) -> dict[str, Any]:
        report = self.dir / f"{tag}.search.json"
        shape_arg = ",".join(f"{k}={v}" for k, v in shape.items())
        cmd = [sys.executable, "-m", "autotune", "search", str(KERNELS[kernel]), "--shape", shape_arg]
        cmd += ["--db", db, "--device", self.a.device, "--json", str(report), "-q", "--local"]
        rc, wall, tail = self.process(cmd)
        if rc != 0 or not report.exists():
            return self.save(tag, {"kernel": kernel, "shape": shape, "error": tail})
        [r] = json.loads(report.read_text())
        best = r.get("best") or {}
        return self.save(
            tag,
            {
                "kernel": kernel,
                "shape": shape,
                "wall_s": wall,
                "search_wall_s": r.get("wall_s"),
                "config": best.get("config"),
                "time_s": best.get("time_s"),
                "stop": r.get("stop_reason"),
                "evaluations": r.get("evaluations"),
                "statuses": r.get("statuses"),
                "history": r.get("history"),
            },
        )


def _brief(row: dict[str, Any]) -> str:
    keys = ("wall_s", "time_s", "overhead_s", "ratio", "error")
    return ", ".join(
        f"{k}={row[k]:.4g}" if isinstance(row.get(k), float) else f"{k}={row[k]}"[:200]
        for k in keys
        if k in row
    )


def _shapes(kernel: str, n: int, given: list[str]) -> list[dict[str, int]]:
    if given:
        return [{k: int(v) for k, v in (kv.split("=") for kv in text.split(","))} for text in given]
    return [dict(s) for s in _kernel(kernel).default_shapes][:n]


def _tag(kernel: str, shape: dict[str, int]) -> str:
    return f"{kernel}__{'_'.join(str(v) for v in shape.values())}"


def bench_kernel(run: Run, kernel: str) -> None:
    """Every part for one kernel: per shape Helion's searches and ours cold; then per shape ours with the
    other shape's trials in (a copy of) its database; then the re-timing and the drop-in."""
    a, parts = run.a, set(run.a.parts.split(","))
    shapes = _shapes(kernel, a.shapes, a.shape)
    # tag -> {"helion_full": config, "ours": flat config, ...}; what earlier runs into --out found is kept,
    # so that the parts may run as separate commands (a device's per-command limit) and retime all at the end
    found = {_tag(kernel, s): _found_before(run, _tag(kernel, s)) for s in shapes}
    for shape in shapes:
        tag = _tag(kernel, shape)
        for effort in a.efforts.split(",") if "helion" in parts else ():
            result, wall, tail = run.child(
                f"{tag}__helion_{effort}", "helion", kernel, json.dumps(shape), effort
            )
            row = run.save(
                f"{tag}__helion_{effort}",
                {"kernel": kernel, "shape": shape, "effort": effort, "wall_s": wall}
                | (result or {"error": tail}),
            )
            if row.get("config"):
                found[tag][f"helion_{effort}"] = row["config"]
        if "ours" in parts:
            row = run.search(kernel, shape, f"sqlite:///{run.dir / (tag + '.db')}", f"{tag}__ours")
            if row.get("config"):
                found[tag]["ours"] = row["config"]
    if "history" in parts and len(shapes) > 1:
        for i, shape in enumerate(shapes):
            tag, other = _tag(kernel, shape), _tag(kernel, shapes[1 - i] if i < 2 else shapes[0])
            if (run.dir / f"{other}.db").exists():
                db = run.dir / f"{tag}__history.db"
                shutil.copyfile(run.dir / f"{other}.db", db)  # the other shape's trials, and nothing else
                row = run.search(kernel, shape, f"sqlite:///{db}", f"{tag}__history")
                if row.get("config"):
                    found[tag]["ours_history"] = row["config"]
    for shape in shapes:
        tag = _tag(kernel, shape)
        if "retime" in parts and any(n.startswith("ours") for n in found[tag]):
            retime(run, kernel, shape, tag, found[tag])
        if "dropin" in parts and shape == shapes[0] and found[tag].get("ours"):
            dropin(run, kernel, shape, f"sqlite:///{run.dir / (tag + '.db')}", tag)


def _found_before(run: Run, tag: str) -> dict[str, Any]:
    """The configs earlier runs into the same --out found for ``tag`` (by part name)."""
    names = {"ours": "ours", "history": "ours_history"}
    out: dict[str, Any] = {}
    for path in sorted(run.dir.glob(f"{tag}__*.json")):
        part = path.name[len(tag) + 2 : -len(".json")]
        if "." in part:
            continue  # a child's or a search's own file
        row = json.loads(path.read_text())
        if row.get("config"):
            out[names.get(part, part)] = row["config"]
    return out


def retime(run: Run, kernel: str, shape: dict[str, int], tag: str, configs: dict[str, Any]) -> None:
    """Every config found for ``shape`` re-timed in one fresh process, interleaved; ratios to Helion full."""
    result, _, tail = run.child(f"{tag}__retime", "retime", kernel, json.dumps(shape), json.dumps(configs))
    row: dict[str, Any] = {"kernel": kernel, "shape": shape, "times": result or {"error": tail}}
    if result and "helion_full" in result:
        full = result["helion_full"]["median_s"]
        row["ratios_to_helion_full"] = {n: t["median_s"] / full for n, t in result.items()}
        row["ratio"] = row["ratios_to_helion_full"].get("ours")
    run.save(f"{tag}__retime", row)


def dropin(run: Run, kernel: str, shape: dict[str, int], db: str, tag: str) -> None:
    """The drop-in's cost per call over plain Helion, both running our stored best for ``shape``."""
    exported = run.dir / f"{tag}.export.json"
    rc, _, tail = run.process(
        [
            sys.executable,
            "-m",
            "autotune",
            "export",
            "--db",
            db,
            "--out",
            str(exported),
            "--kernel",
            _kernel(kernel).name,
        ]
    )
    if rc != 0:
        run.save(f"{tag}__dropin", {"kernel": kernel, "error": tail})
        return
    arg = json.dumps({"db": str(exported)})
    result, _, tail = run.child(f"{tag}__dropin", "dropin", kernel, json.dumps(shape), arg, str(run.a.calls))
    row = {"kernel": kernel, "shape": shape} | (result or {"error": tail})
    if result:
        row["overhead_s"] = result["small_shape"]["overhead_s"]  # the dispatch cost (host-bound)
    run.save(f"{tag}__dropin", row)


def table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'result':58} {'wall s':>9} {'kernel us':>10} {'ratio':>7} {'overhead us':>12}"]
    for r in rows:
        t = r.get("time_s")
        o = r.get("overhead_s")
        lines.append(
            f"{r['name'][:58]:58} {r.get('wall_s') or 0:9.1f} {(t or 0) * 1e6:10.2f} "
            f"{r.get('ratio') or 0:7.3f} {(o or 0) * 1e6:12.3f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    a = _args(argv)
    if a.child:
        return _run_child(a.child)
    os.environ["HELION_BENCH_DEVICE"] = a.device  # the children read it (fresh_env copies os.environ)
    run = Run(a)
    for kernel in a.kernels.split(","):
        if kernel not in KERNELS:
            print(f"unknown kernel {kernel!r} (choose from {', '.join(KERNELS)})", file=sys.stderr)
            return 2
        bench_kernel(run, kernel)
    (run.dir / "summary.json").write_text(json.dumps(run.rows, indent=2, default=str))
    print(table(run.rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
