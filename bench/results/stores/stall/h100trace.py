"""RESULTS section 31: the prior's trust and Kendall tau after each batch for the H100 target 4096x2112x7168 with
the 8 wave-2 H200 landscapes in the store as N-evaluation searches. From the repository root:
python bench/results/stores/stall/h100trace.py N SEED -> the regret at 10/20/40/80 and rows of (results, trust,
tau, best so far / best)."""

import glob
import logging
import os
import sys
import tempfile

sys.path.insert(0, os.getcwd())

import numpy as np  # noqa: E402

from autotune.search import auto, surrogate  # noqa: E402
from autotune.tuning import replay as R  # noqa: E402
from autotune.tuning.landscape import load_landscape  # noqa: E402

logging.getLogger("autotune").setLevel(logging.ERROR)
target = load_landscape("bench/results/h100_stop37/gemm_fp8_stop/gemm_fp8_4096x2112x7168.json")
history = [load_landscape(p) for p in sorted(glob.glob("bench/landscapes/wave2/gemm_fp8_*.json"))]
hist_n, seed = int(sys.argv[1]), int(sys.argv[2])
orig = surrogate.prior_trust
log = []
best = min(r.time_s for r in target.results.values() if r.time_s)


def spy(prior_at, log_t, before, *rest):
    trust, tau = orig(prior_at, log_t, before, *rest)
    found = round(float(np.exp(log_t.min()) / best), 3) if len(log_t) else None
    log.append((len(log_t), round(trust, 3), None if tau is None else round(tau, 3), found))
    return trust, tau


auto.prior_trust = spy
with tempfile.TemporaryDirectory() as tmp:
    runs = R._RunStore(tmp)
    others = [
        R.partial(land, hist_n, 1000 + i, runs, R.DEFAULT_DEPTH) if hist_n else land
        for i, land in enumerate(history)
    ]
    hist = R._history(target, others, f"sqlite:///{tmp}/h.db")
    run = R.replay_one(target, "auto", 80, seed, hist, None, R.DEFAULT_DEPTH, runs=runs)
print("regret at", [round(100 * run.regret(n), 1) for n in (10, 20, 40, 80)])
for row in log[::4]:
    print(row)
