"""Issue 20: the ``auto`` strategy's own cost per proposal, on the CPU, where an evaluation costs ~0.

A 100-evaluation search (``autotune search``'s loop, ``tuning.replay.replay_one``: the simulated backend
answers each config with a recorded H200 time at once, 19 proposals in flight as the H200 pipeline) of one
gemm_fp8 wave-2 landscape (1,440 configs), with an empty store (the GP alone) and with the other seven
shapes in the store (the transfer prior and the GP). Reported: the whole search's wall time and the time
inside the strategy's ``propose``/``tell`` per proposal (the orchestrator's strategy work that the pipeline
cannot hide).

    python bench/auto_rate.py [--seeds 3] [--evaluations 100] [--profile out.prof]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autotune.search.optuna_strategy import OptunaStrategy  # noqa: E402
from autotune.tuning.landscape import load_landscape  # noqa: E402
from autotune.tuning.replay import _history, history_of, replay_one  # noqa: E402

WAVE2 = ROOT / "bench" / "landscapes" / "wave2"
TARGET = "gemm_fp8_4096x4096x7168.json"


class Clock:
    """Seconds inside the strategy's propose and tell, and the configs proposed."""

    def __init__(self) -> None:
        self.propose_s = self.tell_s = 0.0
        self.proposed = 0
        propose, tell = OptunaStrategy.propose, OptunaStrategy.tell
        clock = self

        def timed_propose(strategy, n):  # noqa: ANN001, ANN202
            t0 = time.perf_counter()
            out = propose(strategy, n)
            clock.propose_s += time.perf_counter() - t0
            clock.proposed += len(out)
            return out

        def timed_tell(strategy, config, result):  # noqa: ANN001, ANN202
            t0 = time.perf_counter()
            tell(strategy, config, result)
            clock.tell_s += time.perf_counter() - t0

        OptunaStrategy.propose, OptunaStrategy.tell = timed_propose, timed_tell


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--evaluations", type=int, default=100)
    ap.add_argument("--depth", type=int, default=19)
    ap.add_argument("--profile", default="")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    logging.getLogger("autotune").setLevel(logging.ERROR)
    paths = sorted(WAVE2.glob("gemm_fp8_*.json"))
    lands = [load_landscape(p) for p in paths]
    target = lands[[p.name for p in paths].index(TARGET)]
    # the models' imports (scikit-learn, scipy: ~3-5 s, once per process, off the proposals' path in a
    # search, which preloads the strategy) before any timing
    import scipy.stats  # noqa: F401
    import sklearn.ensemble  # noqa: F401
    import sklearn.gaussian_process  # noqa: F401
    import sklearn.neighbors  # noqa: F401

    rows = []
    prof = cProfile.Profile() if args.profile else None
    with tempfile.TemporaryDirectory() as tmp:
        for store in ("empty", "transfer"):
            history = (
                _history(target, history_of(target, lands), f"sqlite:///{tmp}/h.db")
                if store == "transfer"
                else []
            )
            for seed in range(args.seeds):
                clock = Clock()
                if prof:
                    prof.enable()
                run = replay_one(target, "auto", args.evaluations, seed, history, None, args.depth)
                if prof:
                    prof.disable()
                strategy_s = clock.propose_s + clock.tell_s
                rows.append(
                    {
                        "store": store,
                        "seed": seed,
                        "evaluations": len(run.best_after),
                        "proposals": clock.proposed,
                        "wall_s": run.wall_s,
                        "strategy_s": strategy_s,
                        "ms_per_proposal": 1e3 * strategy_s / max(1, clock.proposed),
                        "regret": run.best_after[-1] / target.best_s - 1 if run.best_after else None,
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    if prof:
        prof.dump_stats(args.profile)
    print(f"\n{'store':9} {'evals':>5} {'proposals':>9} {'wall s':>7} {'strategy s':>10} {'ms/proposal':>11}")
    for store in ("empty", "transfer"):
        rs = [r for r in rows if r["store"] == store]
        med = {
            k: statistics.median(r[k] for r in rs)
            for k in ("evaluations", "proposals", "wall_s", "strategy_s", "ms_per_proposal")
        }
        print(
            f"{store:9} {med['evaluations']:5.0f} {med['proposals']:9.0f} {med['wall_s']:7.2f} "
            f"{med['strategy_s']:10.2f} {med['ms_per_proposal']:11.1f}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
