"""``@triton.autotune`` vs ``autotune search`` on examples/softmax.py's 69 listed configs (issue 13).

Run after ``autotune search examples/softmax.py --db DB`` (bench/gpu_dropin.sh does both, each with a cold
Triton cache). This process, with a fresh ``TRITON_CACHE_DIR`` (set before triton is imported):

1. for each shape (default: the kernel's ``default_shapes``), times the first call of the example's plain
   ``@triton.autotune`` kernel (``softmax_autotuned``: every compile and every benchmark of Triton's tuning),
   synchronised, as wall time, and records the config it picked;
2. reads the config ``autotune search`` stored for the shape (``autotune.best_config``), and checks that
   the drop-in (``@autotune(..., kernel="softmax")``) launches exactly that one, from the database;
3. times Triton's pick, autotune's pick and the first listed config (the default) with the project's
   bench (``autotune.bench_kineto``: the L2-flushed Kineto device time of ``softmax_kernel``), each
   checked against ``torch.softmax``.

On a CPU (``TRITON_INTERPRET=1``, for checking this script) Triton's tuning uses the drop-in's wall-clock
benchmarker, since Triton's own needs a GPU driver; the times then say nothing about a GPU.

    PYTHONPATH=. python bench/dropin_compare.py --db sqlite:///softmax.db --out compare.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def parse_shape(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in (kv.split("=") for kv in text.split(","))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, help="the database `autotune search examples/softmax.py` wrote")
    ap.add_argument("--shape", action="append", type=parse_shape, help="n_rows=..,n_cols=.. (repeatable)")
    ap.add_argument("--num-tests", type=int, default=30)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    cache_dir = tempfile.mkdtemp(prefix="triton_autotune_cold_")
    os.environ["TRITON_CACHE_DIR"] = cache_dir  # cold: before triton is imported
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "examples"))
    import softmax as sm
    import torch
    import triton

    from autotune import best_config
    from autotune.bench import bench_kineto
    from autotune.runtime.triton_autotune import _wall_clock_bench, autotune
    from autotune.space.triton import config_dict

    cuda = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    device = "cuda" if cuda else "cpu"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    key = ["n_rows", "n_cols"]
    if cuda:
        tuned = sm.softmax_autotuned
    else:
        tuned = triton.autotune(configs=sm.CONFIGS, key=key, do_bench=_wall_clock_bench)(sm.softmax_kernel)
    dropin = autotune(configs=sm.CONFIGS, key=key, kernel="softmax", db=args.db)(sm.softmax_kernel)
    shapes = args.shape or [dict(s) for s in sm.KERNEL.default_shapes]
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if cuda else "cpu (interpreter)",
        "triton": triton.__version__,
        "torch": torch.__version__,
        "n_configs": len(sm.CONFIGS),
        "triton_cache_dir": cache_dir,
        "shapes": [],
    }
    if cuda:
        torch.zeros(1, device=device)  # CUDA context before the timed tuning
    for shape in shapes:
        torch.manual_seed(0)
        inputs = sm.KERNEL.make_inputs(shape, device)
        x = inputs["x"]
        ref = sm.KERNEL.reference(inputs)
        sync()
        t0 = time.perf_counter()
        sm._launch(tuned, x)  # Triton compiles and benchmarks every config, then runs the winner
        sync()
        tune_s = time.perf_counter() - t0
        triton_pick = config_dict(tuned.best_config)
        ours = best_config("softmax", db=args.db, device=device, **shape)
        out = sm._launch(dropin, x)
        row: dict[str, Any] = {
            "shape": shape,
            "triton_tune_s": round(tune_s, 3),
            "triton_bench_s": round(float(getattr(tuned, "bench_time", float("nan"))), 3),
            "dropin_source": dropin.last_source,
            "dropin_is_stored": ours is not None and config_dict(dropin.best_config) == ours,
            "dropin_correct": sm.KERNEL.compare(out, ref) is None,
            "timed": [],
        }
        picks = [
            ("triton.autotune", triton_pick),
            ("autotune search", ours),
            ("first config", sm.KERNEL.default_config),
        ]
        for what, cfg in picks:
            if cfg is None:
                row["timed"].append({"what": what, "config": None})
                continue
            dest = torch.empty_like(x)
            run = sm.KERNEL.launcher(cfg, inputs, dest)
            wrong = sm.KERNEL.compare(run(), ref)
            t = bench_kineto(
                run, sm.KERNEL.kernel_names[0], num_tests=args.num_tests, suppress_kineto_output=True
            )
            row["timed"].append(
                {"what": what, "config": cfg, "device_us": round(float(t) * 1e6, 3), "wrong": wrong}
            )
        result["shapes"].append(row)
        print(
            f"{','.join(f'{k}={v}' for k, v in shape.items())}: @triton.autotune tuned in {tune_s:.2f} s; "
            f"drop-in: {dropin.last_source}, stored config {row['dropin_is_stored']}"
        )
        for t in row["timed"]:
            if t["config"] is None:
                print(f"  {t['what']:16s} (nothing stored)")
                continue
            ok = "ok" if t["wrong"] is None else f"WRONG: {t['wrong']}"
            print(f"  {t['what']:16s} {t['device_us']:10.3f} us  {ok}  {t['config']}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
