"""Replay the stopping rule (``autotune search`` without --trials) on landscapes, one JSON line per run as it
finishes (a long measurement leaves its partial result): regret where the search stopped, evaluations, why.

    python bench/stop_replay.py LANDSCAPE... [--seeds 1] [--no-transfer] [--preload MORE...] [--noise 0.01]
        [--history-evaluations N] --out F.jsonl

``--noise``: each measurement drawn around the landscape's time (log-normal, this relative sd), the regret
then that of the config the search declared best (no re-timing in a replay). The rule's settings come from
the environment as in a search: ``AUTOTUNE_STOP_NEIGHBOURS=0`` replays it without the neighbour check.
``--history-evaluations N``: each history landscape (the other targets, ``--preload``) enters the store as an
N-evaluation search of it, not a sweep (issue 19's realistic store).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autotune.tuning.landscape import load_landscape  # noqa: E402
from autotune.tuning.replay import replay  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("landscapes", nargs="+")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--strategy", default="auto")
    ap.add_argument("--no-transfer", action="store_true")
    ap.add_argument("--preload", nargs="*", default=[], help="more landscapes in the store (history only)")
    ap.add_argument("--noise", type=float, default=0.0, help="relative sd of each measurement (e.g. 0.01)")
    ap.add_argument("--history-evaluations", type=int, default=0, help="history as N-evaluation searches")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    logging.getLogger("autotune").setLevel(logging.ERROR)
    targets = [load_landscape(p) for p in args.landscapes]
    out = Path(args.out)

    def write(run) -> None:
        row = {
            "shape": run.shape_key,
            "strategy": run.strategy,
            "seed": run.seed,
            "regret": run.final_regret,
            "noise": args.noise,
            "history": "none" if args.no_transfer else (args.history_evaluations or "sweep"),
            "neighbours": run.polished,
            "stop_neighbours": os.environ.get("AUTOTUNE_STOP_NEIGHBOURS", "1"),
            "evaluations": run.evaluations,
            "stop_reason": run.stop_reason,
            "stop_bound": run.stop_bound,
            "stop_noise": run.stop_noise,
            "regret_at": {n: run.regret(n) for n in (10, 20, 40, 80)},
            "wall_s": round(run.wall_s, 1),
        }
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)

    preload = [load_landscape(p) for p in args.preload]
    replay(
        targets,
        [args.strategy],
        None,
        range(args.seeds),
        transfer=not args.no_transfer,
        preload=preload,
        progress=write,
        noise=args.noise,
        history_evaluations=args.history_evaluations,
    )


if __name__ == "__main__":
    main()
