"""The driver that wrote the rows beside it (RESULTS section 20): an A/B of the stopping rule's neighbour
check in noisy replays, ``python bench/results/stop/neighbours/ab.py on|off NOISE SEEDS OUT LANDSCAPE...``
from the repository root. "off" patched the check out; AUTOTUNE_STOP_NEIGHBOURS=0 with bench/stop_replay.py
does the same since."""

import json
import logging
import sys

sys.path.insert(0, ".")
from autotune.search import stopping
from autotune.tuning.landscape import load_landscape
from autotune.tuning.replay import replay

mode, noise, seeds, out, lands = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:]
if mode == "off":
    stopping.StoppingRule._ask_neighbours = lambda self: False
logging.getLogger("autotune").setLevel(logging.ERROR)


def write(run):
    row = dict(
        mode=mode,
        noise=noise,
        shape=run.shape_key,
        seed=run.seed,
        regret=run.final_regret,
        evaluations=run.evaluations,
        stop=run.stop_reason,
        polished=run.polished,
    )
    with open(out, "a") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps(row), flush=True)


replay(
    [load_landscape(p) for p in lands],
    ["auto"],
    None,
    range(seeds),
    transfer=False,
    progress=write,
    noise=noise,
)
