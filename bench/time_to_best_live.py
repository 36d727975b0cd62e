"""Time to best, live: the default command (the stopping rule) against an exhaustive sweep of a shape.

Time to best, live: the default command (no ``--trials``: the stopping rule) beside an exhaustive sweep of
the same shape, on a GPU with an empty database; regret and whole-command seconds.

    python -m bench time_to_best_live                                  # gemm_fp8 at 2048x2112x7168
    python -m bench time_to_best_live --kernel data/kernels/matmul_fp16.py --shape M=4096,N=4096,K=4096
    python -m bench time_to_best_live --seeds 0,1,2 --shape M=1536,N=7168,K=2048   # a shape outside the landscapes

Every run is a cold command (its own database and Triton cache); the regret of a default run is its best's
time over the sweep's best, less one (the sweep and the default run measure on the same GPU in one lease)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from bench.common import GEMM_FP8, autotune, cold_env, finish, out_dir, parser, search_report


def one(out: Path, name: str, kernel: str, shape: str, extra: list[str], device: str) -> dict[str, Any]:
    db = out / f"{name}.db"
    db.unlink(missing_ok=True)
    cmd = [
        "search",
        kernel,
        "--shape",
        shape,
        "--device",
        device,
        *extra,
        "--db",
        db,
        "--json",
        out / f"{name}.json",
    ]
    run = autotune(cmd, out / f"{name}.log", env=cold_env())
    rep = search_report(out / f"{name}.json") or {}
    return {"rc": run.rc, "command_wall_s": run.wall_s, "report": rep}


def main(argv: list[str] | None = None) -> int:
    ap = parser("time_to_best_live", __doc__)
    ap.add_argument("--kernel", default=str(GEMM_FP8))
    ap.add_argument("--shape", default="M=2048,N=2112,K=7168")
    ap.add_argument("--seeds", default="0,1", help="seeds of the default command's runs")
    ap.add_argument("--device", default="cuda")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = ap.parse_args(argv)
    out = out_dir(args, "time_to_best_live")
    runs = {
        "exhaustive": one(
            out, "exhaustive", args.kernel, args.shape, ["--strategy", "exhaustive"], args.device
        )
    }
    for seed in args.seeds.split(","):
        runs[f"default{seed}"] = one(
            out, f"default{seed}", args.kernel, args.shape, ["--seed", seed], args.device
        )
    sweep = (runs["exhaustive"]["report"].get("best") or {}).get("time_s")
    rows = []
    for name, r in runs.items():
        rep = r["report"]
        best = (rep.get("best") or {}).get("time_s")
        rows.append(
            {
                "run": name,
                "exit": r["rc"],
                "command_s": r["command_wall_s"],
                "evaluations": rep.get("evaluations"),
                "stop": rep.get("stop_reason"),
                "best_us": best * 1e6 if best else None,
                "regret_pct": (best / sweep - 1) * 100 if best and sweep else None,
            }
        )
    finish("time_to_best_live", out, {"kernel": args.kernel, "shape": args.shape, "runs": runs}, argv, rows)
    return 0 if all(r["exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
