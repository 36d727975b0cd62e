"""RESULTS section 26: the prior's trust and Kendall tau after each batch in one replay of the peer convolution
landscapes (python trust_trace.py convolution MI250X HISTORY_EVALUATIONS SEED NOISE; history seeds as
`autotune replay` gives them). Prints the regret at 10/20/40/80 and (results, trust, tau, best so far / best)."""

import logging
import sys
import tempfile

sys.path.insert(0, __import__("os").getcwd())

import numpy as np

from autotune.search import auto, surrogate
from autotune.tuning import replay as R
from autotune.tuning.landscape import load_landscape

logging.getLogger("autotune").setLevel(logging.ERROR)
P = "../shared/data/peer-landscapes/"
kern = sys.argv[1] if len(sys.argv) > 1 else "convolution"
tgt_name = sys.argv[2] if len(sys.argv) > 2 else "MI250X"
hist_n = int(sys.argv[3]) if len(sys.argv) > 3 else 40
seed = int(sys.argv[4]) if len(sys.argv) > 4 else 0
lands = {g: load_landscape(P + f"{kern}_{g}.json") for g in ("A4000", "MI250X", "W6600")}
target = lands[tgt_name]
orig = surrogate.prior_trust
log = []


def spy(prior_at, log_t, before):
    t, tau = orig(prior_at, log_t, before)
    log.append(
        (
            len(log_t),
            round(t, 3),
            None if tau is None else round(tau, 3),
            round(float(np.exp(log_t.min()) / target_best), 3),
        )
    )
    return t, tau


auto.prior_trust = spy
target_best = min(r.time_s for r in target.results.values() if r.time_s)
with tempfile.TemporaryDirectory() as tmp:
    runs = R._RunStore(tmp)
    others = [(i, land) for i, (g, land) in enumerate(lands.items()) if g != tgt_name]
    others = [
        R.partial(land, hist_n, 1000 + i, runs, R.DEFAULT_DEPTH) if hist_n else land for i, land in others
    ]
    hist = R._history(target, others, f"sqlite:///{tmp}/h.db")
    run = R.replay_one(
        target,
        "auto",
        80,
        seed,
        hist,
        None,
        R.DEFAULT_DEPTH,
        runs=runs,
        noise=float(sys.argv[5]) if len(sys.argv) > 5 else 0.0,
    )
print("regret at", [round(100 * run.regret(n), 1) for n in (10, 20, 40, 80)])
for row in log[::3]:
    print(row)
