"""The engine: an exhaustive gemm_fp8 search (1,176 configs) and a 100-evaluation `auto` search, cold.

The engine: an exhaustive gemm_fp8 search of 1,176 configs and a 100-evaluation `auto` search of the same
shape, whole commands, cold; evaluations per second, the orchestrator's cost per trial, the best found.

    python -m bench engine                       # needs a CUDA GPU
    python -m bench engine --runs exhaustive --devices all

Each run is ``autotune search examples/gemm_fp8.py`` in a fresh process with its own database and an empty
Triton cache, as a user runs it. The exhaustive run measures every config of data/configs/startup_configs_1176.json
(the one-program-per-tile kernel's configs at this shape); ``auto100`` is the default strategy at a fixed
budget of 100 evaluations (its rate against the exhaustive one is what the strategy's own cost shows)."""

from __future__ import annotations

import sys
from typing import Any

from bench.common import DATA, GEMM_FP8, autotune, cold_env, finish, out_dir, parser, search_report

CONFIGS_1176 = DATA / "configs" / "startup_configs_1176.json"
RUNS = {
    "exhaustive": ["--configs", CONFIGS_1176, "--strategy", "exhaustive", "--trials", "5000"],
    "auto100": ["--trials", "100", "--seed", "0"],
}


def main(argv: list[str] | None = None) -> int:
    ap = parser("engine", __doc__)
    ap.add_argument("--shape", default="M=2048,N=2112,K=7168")
    ap.add_argument("--runs", default=",".join(RUNS), help=f"which of {', '.join(RUNS)}")
    ap.add_argument("--devices", default="", help="--devices of the searches (default: the first GPU)")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = ap.parse_args(argv)
    out = out_dir(args, "engine")
    rows, results = [], {}
    for name in args.runs.split(","):
        db = out / f"{name}.db"
        db.unlink(missing_ok=True)
        extra = ["--devices", args.devices] if args.devices else []
        cmd = ["search", GEMM_FP8, "--shape", args.shape, *RUNS[name], *extra, "--db", db]
        run = autotune([*cmd, "--json", out / f"{name}.json"], out / f"{name}.log", env=cold_env())
        rep: dict[str, Any] = search_report(out / f"{name}.json") or {}
        results[name] = {"rc": run.rc, "command_wall_s": run.wall_s, "report": rep}
        evals = rep.get("evaluations")
        rows.append(
            {
                "run": name,
                "exit": run.rc,
                "command_s": run.wall_s,
                "search_s": rep.get("wall_s"),
                "evaluations": evals,
                "evals_per_s": evals / rep["wall_s"] if evals and rep.get("wall_s") else None,
                "loop_ms_per_trial": (rep.get("loop_s_per_trial") or 0) * 1e3 or None,
                "best_us": (rep.get("best") or {}).get("time_s", 0) * 1e6 or None,
            }
        )
    finish("engine", out, results, argv, rows)
    return 0 if all(r["exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
