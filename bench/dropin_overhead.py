"""Per-launch cost of the ``@triton.autotune`` drop-in (``autotune.triton_autotune``) after the first launch.

Measured, not asserted. Two parts:

- ``dispatch``: the decorator's own cost, on any machine: the wrappers around a kernel whose ``run`` does
  nothing (a ``KernelInterface``), so the time per call is the wrapper's dispatch only. Rows: the bare
  launch (``kernel[grid](..., **config)``), the drop-in answered by a database (an ``autotune export``
  file written here, with one tuned shape), the drop-in on its fallback (a kernel nothing tuned), and
  Triton's ``Autotuner`` once it has tuned (its per-key cache).
- ``launch`` (with CUDA, or ``--launch`` in the interpreter): the same wrappers around
  examples/softmax.py's real ``@triton.jit`` kernel on a 1 x 256 fp16 row: host time per launch over
  ``--n`` launches (async on a GPU: the loop is host-bound for so small a kernel), synchronised at the
  end. ``--db`` gives the drop-in a tuned database (e.g. the one ``bench/gpu_dropin.sh`` tuned); without
  it the drop-in row is its fallback.

Each row: the least over ``--rounds`` rounds of the mean time per call; the drop-in's overhead is its row
minus the bare row.

    PYTHONPATH=. python bench/dropin_overhead.py [--db sqlite:///tuned.db] [--n 20000] [--out overhead.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def per_call(fn: Any, n: int, rounds: int, sync: Any = None) -> float:
    """The least over ``rounds`` of the mean seconds per call of ``fn`` over ``n`` calls (other work on
    the host only ever adds time, so the least round is the closest to the wrapper's own cost)."""
    fn()  # the first launch (lookup, compile) is not what is measured
    if sync:
        sync()
    means = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if sync:
            sync()
        means.append((time.perf_counter() - t0) / n)
    return min(means)


def export_file(kernel: str, dims: dict[str, int], config: dict[str, Any], device: str) -> str:
    """An ``autotune export`` file holding one tuned shape of ``kernel`` on this device."""
    from autotune.env import current_device_name
    from autotune.records import EXPORT_FORMAT, EXPORT_VERSION, BestRecord

    record = BestRecord(
        kernel_name=kernel,
        shape_key=",".join(f"{k}={v}" for k, v in dims.items()),
        dims=dims,
        dtypes={},
        device_name=current_device_name(device),
        cc="",
        env_hash="",
        torch="",
        triton="",
        source_hash="",
        space_hash="",
        config=config,
        time_s=1e-6,
        tflops=None,
        updated_at=datetime.now(timezone.utc),
        key_id=0,
        trial_id=0,
    )
    fd, path = tempfile.mkstemp(suffix=".json", prefix="dropin_overhead_")
    with os.fdopen(fd, "w") as f:
        json.dump({"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "records": [record.to_json()]}, f)
    return path


def dispatch_rows(n: int, rounds: int) -> dict[str, float]:
    import triton
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import KernelInterface

    from autotune.runtime.triton_autotune import autotune

    class NullKernel(KernelInterface):
        """A kernel that launches nothing: what remains is the wrappers' dispatch."""

        arg_names = ["x_ptr", "n", "BLOCK"]

        def __init__(self) -> None:
            self.fn = lambda x_ptr, n, BLOCK: None  # what Triton's wrappers unwrap to (base_fn)

        def run(self, *args: Any, grid: Any, warmup: Any, **kwargs: Any) -> None:
            return None

    null = NullKernel()
    configs = [triton.Config({"BLOCK": b}, num_warps=w) for b in (256, 512, 1024) for w in (2, 4)]
    best = {"BLOCK": 512, "num_warps": 4, "num_stages": 3}
    # '' = the device a launch without tensor arguments looks up (cuda:current on a GPU host, else cpu)
    db = export_file("dropin_null", {"n": 1024}, best, "")
    try:
        hit = autotune(configs=configs, key=["n"], kernel="dropin_null", db=db)(null)
        miss = autotune(configs=configs, key=["n"], kernel="dropin_untuned", db=db)(null)
        tuned = Autotuner(
            null, null.arg_names, configs, ["n"], None, None, do_bench=lambda f, quantiles: [1.0] * 3
        )
        grid = (4,)
        kwargs = triton.Config({"BLOCK": 512}, num_warps=4).all_kwargs()
        rows = {
            "bare launch": per_call(lambda: null[grid](None, 1024, **kwargs), n, rounds),
            "drop-in, database config": per_call(lambda: hit[grid](None, 1024), n, rounds),
            "drop-in, fallback (untuned)": per_call(lambda: miss[grid](None, 1024), n, rounds),
            "@triton.autotune, tuned key": per_call(lambda: tuned[grid](None, 1024), n, rounds),
        }
        assert hit.last_source == "database" and miss.last_source == "first", (
            hit.last_source,
            miss.last_source,
        )
        return rows
    finally:
        os.unlink(db)


def launch_rows(n: int, rounds: int, db: str | None) -> dict[str, Any]:
    import torch
    import triton

    sys.path.insert(0, str(ROOT / "examples"))
    import softmax as sm

    from autotune.runtime.triton_autotune import _wall_clock_bench, autotune

    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.randn(1, 256, device=device, dtype=torch.float16)
    out = torch.empty_like(x)
    args = (out, x, x.stride(0), out.stride(0), 1, 256)
    grid = (1,)
    dropin = autotune(configs=sm.CONFIGS, key=["n_rows", "n_cols"], kernel="softmax", db=db)(
        sm.softmax_kernel
    )
    dropin[grid](*args)
    config = dropin.best_config
    # Triton's benchmarker needs a GPU driver: in the interpreter, the drop-in's wall-clock one
    bench = {} if device == "cuda" else {"do_bench": _wall_clock_bench}
    plain = triton.autotune(configs=[config, sm.CONFIGS[0]], key=["n_rows", "n_cols"], **bench)(
        sm.softmax_kernel
    )
    kwargs = config.all_kwargs()
    sync = torch.cuda.synchronize if device == "cuda" else None
    rows = {
        "bare launch": per_call(lambda: sm.softmax_kernel[grid](*args, **kwargs), n, rounds, sync),
        f"drop-in ({dropin.last_source})": per_call(lambda: dropin[grid](*args), n, rounds, sync),
        "@triton.autotune, tuned key": per_call(lambda: plain[grid](*args), n, rounds, sync),
    }
    return {"device": device, "config": str(config), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20000, help="calls per round")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--db", help="a database with softmax tuned, for the launch rows' drop-in")
    ap.add_argument(
        "--launch", action="store_true", help="also the real-kernel rows without CUDA (interpreter)"
    )
    ap.add_argument("--out", type=Path, help="write the results as JSON")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import torch
    import triton

    result: dict[str, Any] = {"triton": triton.__version__, "torch": torch.__version__, "n": args.n}
    result["dispatch"] = dispatch_rows(args.n, args.rounds)
    if torch.cuda.is_available() or args.launch:
        result["launch"] = launch_rows(args.n if torch.cuda.is_available() else 20, args.rounds, args.db)
    for part in ("dispatch", "launch"):
        if part not in result:
            continue
        rows = result[part] if part == "dispatch" else result[part]["rows"]
        bare = rows["bare launch"]
        where = "" if part == "dispatch" else f" on {result[part]['device']} ({result[part]['config']})"
        print(f"{part}{where}: us per call (overhead vs the bare launch)")
        for name, s in rows.items():
            print(f"  {name:32s} {s * 1e6:9.3f}   {(s - bare) * 1e6:+8.3f}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
