"""Nightly verdicts against noise and against a real slowdown (issue 43, item 3).

    python -m bench nightly_noise                                   # CPU: 20 unchanged runs, 20 slowed
    python -m bench nightly_noise --device cuda:0 --kernel examples/gemm_fp8.py --runs 5 --slowed-runs 5

One job file (the README's nightly job on the given kernel file, wrapped by ``tests/kernels/slowed.py`` so
a config can be made slower through an environment variable) and one SQLite database in the output
folder. The first ``autotune nightly`` run tunes every shape; then ``--runs`` runs on the unchanged
machine, each exactly as cron would start it (``autotune nightly JOB --fail-on-regression --json``), count
the regressions called (target: 0); then ``--slowed-runs`` runs, each from a copy of the database as it
stood after the unchanged runs, with every stored best made ``--factor`` slower (more launches per call of
the same kernel, through the same timing path), count the runs whose slowed bests were all called a
regression (target: all). Prints a short table last; the full results go to ``--out``/nightly_noise.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WRAPPER = ROOT / "tests" / "kernels" / "slowed.py"
CALLED = ("regression", "confirmed")


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench nightly_noise", description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda:0")
    p.add_argument("--kernel", default=str(ROOT / "examples" / "matmul_cpu.py"), help="the kernel file")
    p.add_argument("--shapes", default="default", help='"default", or shapes as "M=256,N=256,K=256;..."')
    p.add_argument("--runs", type=int, default=20, help="nightly runs on the unchanged machine")
    p.add_argument("--slowed-runs", type=int, default=20, help="runs with every stored best slowed")
    p.add_argument("--factor", type=float, default=1.3, help="the slowdown of a slowed best")
    p.add_argument("--trials", type=int, default=20, help="evaluations per shape of the tuning run")
    p.add_argument("--repeats", type=int, default=10, help="verification rounds per best")
    p.add_argument("--threshold", type=float, default=None, help="default: 0.15 on a CPU, 0.03 on a GPU")
    p.add_argument("--num-tests", type=int, default=None, help="timed calls per measurement (job default)")
    p.add_argument("--out", default=os.environ.get("OUT") or ".out/bench", help="output folder")
    return p.parse_args(argv)


def _job(a: argparse.Namespace, folder: Path) -> Path:
    shapes: Any = ["default"]
    if a.shapes != "default":
        shapes = [s.strip() for s in a.shapes.split(";") if s.strip()]
    threshold = a.threshold if a.threshold is not None else (0.15 if a.device == "cpu" else 0.03)
    job = {
        "name": "nightly-noise",
        "database": f"sqlite:///{folder / 'nightly.db'}",
        "devices": a.device,
        "kernels": [{"file": str(WRAPPER), "shapes": shapes}],
        "trials": a.trials,
        "budget_s": 0,
        "verify": {"repeats": a.repeats, "threshold": threshold, "alpha": 0.05, "reference": True},
    }
    if a.num_tests:
        job["num_tests"] = a.num_tests
    path = folder / "job.yaml"
    path.write_text(json.dumps(job, indent=2))  # JSON is YAML
    return path


def _nightly(job: Path, folder: Path, tag: str, slowed: list[dict[str, Any]], a: argparse.Namespace) -> dict:
    """One ``autotune nightly`` run, as cron starts it; its summary, exit code and seconds."""
    summary = folder / f"{tag}.json"
    env = dict(os.environ)
    env.update(
        AUTOTUNE_SLOWED_KERNEL=str(Path(a.kernel).resolve()),
        AUTOTUNE_SLOWED_CONFIGS=json.dumps(slowed),
        AUTOTUNE_SLOWED_FACTOR=str(a.factor),
    )
    cmd = [sys.executable, "-m", "autotune", "nightly", str(job), "--fail-on-regression", "-q"]
    t0 = time.monotonic()
    proc = subprocess.run([*cmd, "--json", str(summary)], env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    (folder / f"{tag}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode not in (0, 1) or not summary.exists():
        raise SystemExit(f"{tag}: autotune nightly exited {proc.returncode}: {proc.stderr[-2000:]}")
    doc = json.loads(summary.read_text())
    verifications = [
        {k: v.get(k) for k in ("shape_key", "status", "ratio", "p_value", "error")}
        for v in doc.get("verifications", [])
    ]
    return {"tag": tag, "exit": proc.returncode, "wall_s": round(wall, 1), "verifications": verifications}


def _bests(folder: Path) -> list[dict[str, Any]]:
    from autotune.store import Store

    store = Store(f"sqlite:///{folder / 'nightly.db'}")
    try:
        return [dict(s.best_config) for s in store.history.key_states() if s.best_config]
    finally:
        store.close()


def _series(a: argparse.Namespace, folder: Path) -> dict[str, Any]:
    job = _job(a, folder)
    tuning = _nightly(job, folder, "tune", [], a)
    unchanged = [_nightly(job, folder, f"unchanged-{i:02d}", [], a) for i in range(a.runs)]
    bests = _bests(folder)
    snapshot = folder / "after-unchanged.db"
    shutil.copy(folder / "nightly.db", snapshot)
    slowed = []
    for i in range(a.slowed_runs):
        shutil.copy(snapshot, folder / "nightly.db")  # each slowed run starts from the same state
        slowed.append(_nightly(job, folder, f"slowed-{i:02d}", bests, a))
    return {"tuning": tuning, "unchanged": unchanged, "slowed": slowed, "bests": bests}


def _counts(runs: list[dict[str, Any]]) -> dict[str, int]:
    verdicts = [v["status"] for r in runs for v in r["verifications"]]
    return {
        "runs": len(runs),
        "verifications": len(verdicts),
        "called": sum(s in CALLED for s in verdicts),
        "runs_all_called": sum(
            bool(r["verifications"]) and all(v["status"] in CALLED for v in r["verifications"]) for r in runs
        ),
        "runs_any_called": sum(any(v["status"] in CALLED for v in r["verifications"]) for r in runs),
        "exit_1": sum(r["exit"] == 1 for r in runs),
        "inconclusive": sum(s == "inconclusive" for s in verdicts),
    }


def main(argv: list[str] | None = None) -> int:
    a = _args(argv)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    folder = Path(a.out).resolve() / "nightly_noise" / stamp
    folder.mkdir(parents=True, exist_ok=True)
    series = _series(a, folder)
    result = {
        "benchmark": "nightly_noise",
        "date": stamp,
        "machine": f"{platform.node()} {platform.processor() or platform.machine()} ({os.cpu_count()} cores)",
        "args": vars(a),
        "commit": _commit(),
        "counts": {"unchanged": _counts(series["unchanged"]), "slowed": _counts(series["slowed"])},
        **series,
    }
    out = Path(a.out).resolve() / "nightly_noise.json"
    out.write_text(json.dumps(result, indent=2, default=str))
    u, s = result["counts"]["unchanged"], result["counts"]["slowed"]
    print(f"\nnightly_noise on {a.device}, {a.kernel}, factor {a.factor} ({out})")
    print(
        f"{'series':<10} {'runs':>5} {'verifications':>14} {'called':>7} {'runs all called':>16} {'exit 1':>7}"
    )
    for name, c in (("unchanged", u), ("slowed", s)):
        print(
            f"{name:<10} {c['runs']:>5} {c['verifications']:>14} {c['called']:>7} "
            f"{c['runs_all_called']:>16} {c['exit_1']:>7}"
        )
    return 0


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        return ""


if __name__ == "__main__":
    raise SystemExit(main())
