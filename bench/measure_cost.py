"""Where one measurement's seconds go in the timing worker (issue 20: ~18-27 ms a measurement on an H100
beyond its kernel's own calls, `bench/results/h100_rate/*_timeline.json`).

Runs the timing worker's own code in this process (``_load``/``_Evaluation``: the kernel file, its inputs and
reference, the compile cache hit, the check, the clocks watch and the Kineto bench) over N configs of a config
file, timing each part, then the same configs again under variants of the bench to see what each part is
worth and whether the kernel times change:

    python bench/measure_cost.py examples/gemm_fp8.py --shape M=2048,N=2112,K=7168 \
        --configs bench/results/startup_configs_1176.json -n 60 --out cost.json

GPU only (the CPU bench differs). Prints a table last; the JSON has every row."""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autotune import bench, clocks  # noqa: E402
from autotune.engine import worker  # noqa: E402
from autotune.engine.messages import Job  # noqa: E402
from autotune.shapes import parse_shape  # noqa: E402
from autotune.trial import TrialResult, TrialStatus  # noqa: E402

SPENT: dict[str, float] = defaultdict(float)


def wrapped(owner, name: str, label: str):
    """``owner.name`` timed into SPENT[label] while inside."""
    orig = getattr(owner, name)

    def timed(*a, **k):
        t0 = time.perf_counter()
        try:
            return orig(*a, **k)
        finally:
            SPENT[label] += time.perf_counter() - t0

    return replaced(owner, name, timed)


def one_pass(ev, configs, shape, num_tests: int) -> tuple[list[dict], dict[str, float]]:
    SPENT.clear()
    rows = []
    with (
        wrapped(bench, "_record", "bench: profiler session (prepare+warm-up+window+disable)"),
        wrapped(bench._Window, "warm_up", "bench:   warm-up calls"),
        wrapped(bench._Window, "window", "bench:   timed calls"),
        wrapped(bench, "_window_events", "bench: events() and matching"),
        wrapped(bench, "_release_heap", "bench: malloc_trim"),
        wrapped(bench, "bench_kineto_detailed", "bench_kineto_detailed (all)"),
        wrapped(clocks, "measure", "clocks.measure (with the bench inside)"),
        wrapped(worker, "_metrics", "check metrics"),
        wrapped(ev.loaded, "compare", "check compare"),
    ):
        for cfg in configs:
            job = Job("eval", cfg, shape, num_tests)
            t0 = time.perf_counter()
            launcher, res = ev.compile(job, TrialResult(TrialStatus.OK, dict(cfg), **ev.stamp))
            t1 = time.perf_counter()
            SPENT["compile (cache hit)"] += t1 - t0
            if launcher is None:
                continue
            res = ev.run(job, launcher, res)
            t2 = time.perf_counter()
            SPENT["run (all)"] += t2 - t1
            rows.append(
                {
                    "config": cfg,
                    "status": res.status.value,
                    "time_s": res.time_s,
                    "run_s": t2 - t1,
                    "compile_s": t1 - t0,
                }
            )
    n = max(1, len(rows))
    return rows, {k: v / n * 1e3 for k, v in SPENT.items()}


@contextmanager
def replaced(owner, attr, new):
    """``owner.attr`` is ``new`` while inside (``os.environ`` items too)."""
    is_map = isinstance(owner, dict) or owner is os.environ
    orig = owner.get(attr) if is_map else getattr(owner, attr)
    owner.__setitem__(attr, new) if is_map else setattr(owner, attr, new)
    try:
        yield
    finally:
        if not is_map:
            setattr(owner, attr, orig)
        elif orig is None:
            owner.pop(attr, None)
        else:
            owner[attr] = orig


def _flush_nosync(self) -> None:
    for buf in self.buffers:
        buf.zero_()


def variant(name: str):
    """A context that changes the bench for a variant."""
    if name == "base" or name.startswith("tests"):  # testsN: only the timed calls' count differs
        return contextmanager(lambda: (yield))()
    if name == "full_warmup":  # the seed recipe's whole warm-up round before every measurement
        return replaced(os.environ, "AUTOTUNE_WARM_CALLS", "0")
    if name == "no_clocks":
        return replaced(worker._Evaluation, "timed", lambda self, take: (take(), None))
    if name == "no_trim":
        return replaced(bench, "_release_heap", lambda: None)
    if name == "flush_nosync":
        return replaced(bench._Flusher, "__call__", _flush_nosync)
    raise SystemExit(f"unknown variant {name}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("kernel")
    ap.add_argument("--shape", required=True)
    ap.add_argument("--configs", required=True)
    ap.add_argument("-n", type=int, default=60)
    ap.add_argument("--variants", default="base,full_warmup,base,full_warmup")
    ap.add_argument("--out", default="cost.json")
    ap.add_argument("--device", default="cuda", help="cpu: only to check this script runs")
    args = ap.parse_args()
    t0 = time.perf_counter()
    loaded, info = worker._load(args.kernel, args.device)
    ev = worker._Evaluation(loaded, info.device)
    shape = parse_shape(args.shape)
    ev.prepare(shape)
    bench.warm_up(ev.device)
    print(f"load + inputs + warm-up {time.perf_counter() - t0:.2f} s", flush=True)
    configs = json.loads(Path(args.configs).read_text())
    picked, t0 = [], time.perf_counter()
    for cfg in configs:  # compile until n configs compiled (a cold compile: the compile pool's part)
        job = Job("eval", cfg, shape, 30)
        launcher, res = ev.compile(job, TrialResult(TrialStatus.OK, dict(cfg), **ev.stamp))
        if launcher is not None:
            picked.append(cfg)
        if len(picked) >= args.n:
            break
    print(f"cold compile of {len(picked)} configs {time.perf_counter() - t0:.1f} s", flush=True)
    one_pass(ev, picked[:3], shape, 30)  # the first measurements' one-time costs stay out

    report = {"gpu": None, "variants": {}}
    import torch

    report["gpu"] = torch.cuda.get_device_name() if ev.cuda else "cpu"
    base_times = None
    for name in args.variants.split(","):
        tests = int(name[5:]) if name.startswith("tests") else 30
        with variant(name):
            rows, parts = one_pass(ev, picked, shape, tests)
        times = {json.dumps(r["config"], sort_keys=True): r["time_s"] for r in rows if r["time_s"]}
        ratio = None
        if base_times is None and name == "base":
            base_times = times
        elif base_times:
            common = [k for k in times if k in base_times]
            ratio = statistics.median(times[k] / base_times[k] for k in common) if common else None
            worst = max((abs(times[k] / base_times[k] - 1) for k in common), default=None)
        kernel_ms = statistics.mean(r["time_s"] for r in rows if r["time_s"]) * 1e3
        # a variant run twice keeps both passes: "base", "base#2", ...
        seen = sum(k.split("#")[0] == name for k in report["variants"])
        report["variants"][f"{name}#{seen + 1}" if seen else name] = {
            "rows": rows,
            "parts_ms": parts,
            "mean_kernel_ms": kernel_ms,
            "ratio_vs_base": ratio,
            "worst_dev_vs_base": worst if ratio is not None else None,
        }
        print(
            f"\n== {name}: {len(rows)} measurements, mean kernel {kernel_ms * 1e3:.1f} us, "
            f"time vs base {ratio if ratio is None else round(ratio, 4)}",
            flush=True,
        )
        for k, v in sorted(parts.items(), key=lambda kv: -kv[1]):
            print(f"  {v:8.2f} ms  {k}")
    # the base pass again under cProfile: the functions a measurement spends its time in
    prof = cProfile.Profile()
    prof.enable()
    one_pass(ev, picked[:30], shape, 30)
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(30)
    report["profile"] = s.getvalue()
    Path(args.out).write_text(json.dumps(report, indent=1, default=str))
    print(s.getvalue()[:6000])


if __name__ == "__main__":
    main()
