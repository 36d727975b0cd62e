"""Time to best, replayed: regret at 10-80 evaluations and at the stopping rule, recorded landscapes.

Time to best, replayed: mean regret of each strategy at 10/20/40/80 evaluations, and where the default
command (the stopping rule) stops, on recorded landscapes (gemm_fp8 on the H200; the peer convolution and
dedispersion landscapes on 3 GPUs), with the other shapes' or GPUs' sweeps in the store, their 40-evaluation searches, or nothing.

    python -m bench time_to_best_replay                          # every set, 4 seeds (CPU only; long)
    python -m bench time_to_best_replay --sets gemm --stores empty --seeds 1   # a quick look

Each cell is ``autotune replay LANDSCAPES --strategy S [--trials 80 | the stopping rule] [store]`` (leave one
out: each landscape is searched with the others in the store; the held-out gemm_fp8 set has the 8 wave-2
landscapes as history). Replays here are noise-free. The peer landscapes are read from
``--peer`` (default: the first of ../shared/data/peer-landscapes, /work/shared/data/peer-landscapes); a set
whose files are missing is skipped and said so."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from bench.common import DATA, ROOT, autotune, finish, out_dir, parser

BUDGETS = (10, 20, 40, 80)
PEER_DIRS = (ROOT.parent / "shared" / "data" / "peer-landscapes", Path("/work/shared/data/peer-landscapes"))


#: the history each store puts in the database beside the target (leave one out)
STORES = {"full": [], "real": ["--history-evaluations", "40"], "empty": ["--no-transfer"]}


def landscape_sets(peer: Path | None) -> dict[str, tuple[list[Path], list[Path]]]:
    """Each set's targets, and the landscapes preloaded as history only."""
    peer = peer or next((d for d in PEER_DIRS if d.is_dir()), PEER_DIRS[0])
    wave2 = sorted((DATA / "landscapes" / "wave2").glob("gemm_fp8_*.json"))
    return {
        "gemm": (wave2, []),
        "held": (sorted((DATA / "landscapes").glob("gemm_fp8_*.json")), wave2),
        "convolution": (sorted(peer.glob("convolution_*.json")), []),
        "dedispersion": (sorted(peer.glob("dedispersion_*.json")), []),
    }


def regret(run: dict[str, Any], n: int) -> float:
    best = run["best_after"]
    return best[min(n, len(best)) - 1] / run["best_s"] - 1.0 if best else float("inf")


def cell(
    out: Path, files: tuple[list[Path], list[Path]], name: str, strategy: str, extra: list[str], seeds: int
) -> list[dict]:
    path = out / f"{name}.json"
    targets, preload = files
    argv = ["replay", *targets, "--strategy", strategy, "--seeds", str(seeds), *extra, "--json", path]
    if preload and "--no-transfer" not in extra:
        argv += ["--preload", *preload]  # the last option: it takes every file after it
    run = autotune(argv, out / f"{name}.log", env=None, timeout=36_000)
    if run.rc != 0:
        raise SystemExit(f"time_to_best_replay: {name} failed (exit {run.rc}), see {run.log}")
    return json.loads(path.read_text())


def summary(runs: list[dict[str, Any]], budgets: tuple[int, ...]) -> dict[str, float]:
    row = {f"@{b}_pct": statistics.fmean(regret(r, b) for r in runs) * 100 for b in budgets}
    row["runs"] = len(runs)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = parser("time_to_best_replay", __doc__)
    ap.add_argument("--sets", default="gemm,held,convolution,dedispersion")
    ap.add_argument(
        "--stores",
        default="full,empty",
        help="full: the others' sweeps; real: their 40-evaluation searches; empty",
    )
    ap.add_argument("--strategies", default="auto,tpe")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--peer", type=Path, help="folder of the peer landscapes")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = ap.parse_args(argv)
    out = out_dir(args, "time_to_best_replay")
    sets = landscape_sets(args.peer)
    rows, results = [], {}
    for set_name in args.sets.split(","):
        files = sets.get(set_name) or ([], [])
        if len(files[0]) + len(files[1]) < 2:
            print(f"time_to_best_replay: skipping {set_name}: fewer than 2 landscapes found", file=sys.stderr)
            continue
        for store in args.stores.split(","):
            extra = STORES[store]
            for strategy in args.strategies.split(","):
                name = f"{set_name}_{store}_{strategy}"
                fixed = cell(out, files, name, strategy, [*extra, "--trials", str(BUDGETS[-1])], args.seeds)
                row = {"set": set_name, "store": store, "strategy": strategy, **summary(fixed, BUDGETS)}
                if strategy == "auto":  # the default command: the stopping rule decides
                    rule = cell(out, files, f"{name}_rule", strategy, extra, args.seeds)
                    row["rule_pct"] = statistics.fmean(regret(r, len(r["best_after"])) for r in rule) * 100
                    row["rule_evals"] = statistics.fmean(len(r["best_after"]) for r in rule)
                    results[f"{name}_rule"] = rule
                rows.append(row)
                results[name] = fixed
    for r in rows:
        r.setdefault("rule_pct", None)
        r.setdefault("rule_evals", None)
    finish("time_to_best_replay", out, {"summary": rows, "runs": results}, argv, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
