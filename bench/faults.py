"""The fault kernel: 8 configs that hang, run out of memory, crash, fail to compile or compute wrong.

The fault kernel: an exhaustive search of 8 configs that hang, run out of memory, crash, fail to compile
or compute wrong, whole command timed, every status typed (data/kernels/faults.py).

    python -m bench faults            # needs a CUDA GPU; the target is <= 30 s whole command

The expected status of each case is in the kernel file's docstring; the table shows what was stored
(``autotune trials faults -f json``) beside it."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from bench.common import DATA, ROOT, autotune, cold_env, finish, out_dir, parser

KERNEL = DATA / "kernels" / "faults.py"
#: what each case must be stored as (the kernel file's docstring)
EXPECTED = {
    "good": "ok",
    "good_wide": "ok",
    "hang": "timeout",
    "oom": "launch_failed",
    "illegal_address": "crashed",
    "compile_error": "compile_failed",
    "nan": "wrong_result",
    "wrong": "wrong_result",
}


def stored_trials(db: str) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-m", "autotune", "trials", "faults", "-f", "json", "--db", db],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    trials = json.loads(proc.stdout) if proc.returncode == 0 else []
    return [t for t in trials if t.get("kind") == "search"]  # the finalists' re-timings are extra rows


def main(argv: list[str] | None = None) -> int:
    ap = parser("faults", __doc__)
    ap.add_argument("--device", default="cuda")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = ap.parse_args(argv)
    out = out_dir(args, "faults")
    db = f"sqlite:///{out / 'faults.db'}"
    (out / "faults.db").unlink(missing_ok=True)
    run = autotune(
        [
            "search",
            KERNEL,
            "--strategy",
            "exhaustive",
            "--device",
            args.device,
            "--db",
            db,
            "--json",
            out / "faults.json",
        ],
        out / "faults.log",
        env=cold_env(),
    )
    trials = stored_trials(db)
    rows = []
    for t in trials:
        case = t.get("config", {}).get("CASE")
        rows.append(
            {
                "case": case,
                "status": t.get("status"),
                "expected": EXPECTED.get(case),
                "time_us": t["time_s"] * 1e6 if t.get("time_s") else None,
                "error": (t.get("error") or "").splitlines()[0][:70] if t.get("error") else None,
            }
        )
    typed = all(r["status"] == r["expected"] for r in rows) and len(rows) == len(EXPECTED)
    rows.append(
        {
            "case": "whole command",
            "status": f"exit {run.rc}",
            "expected": "all typed" if typed else "MISMATCH",
        }
    )
    rows[-1]["time_us"] = None
    rows[-1]["error"] = f"{run.wall_s} s"
    res = {"rc": run.rc, "wall_s": run.wall_s, "all_typed": typed, "trials": trials}
    finish("faults", out, res, argv, rows)
    return 0 if typed and run.rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
