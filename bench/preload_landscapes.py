"""Write landscape files into a database as searches would have (one key per shape): the store the ``auto``
strategy learns from in the H200 check of bench/gpu_auto.sh.   python bench/preload_landscapes.py DB FILE..."""

from __future__ import annotations

import sys

from autotune.tuning.landscape import load_landscape
from autotune.tuning.replay import history_store

if __name__ == "__main__":
    store = history_store([load_landscape(p) for p in sys.argv[2:]], sys.argv[1])
    print(f"{sys.argv[1]}: {len(sys.argv) - 2} landscapes, {len(store.history.key_states())} keys")
    store.close()
