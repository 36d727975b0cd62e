"""The ``auto`` strategy's knobs on the recorded landscapes: `autotune replay`'s run with module constants of
``autotune.search.auto`` set in-process (bench/RESULTS.md section 7, "Empty store").

    PYTHONPATH=. python bench/replay_knobs.py --no-transfer KAPPA=1.5

Prints, per budget, the mean regret in % over every shape and seed, then the mean per landscape (file order).
"""

from __future__ import annotations

import argparse
import glob
import statistics

from autotune.search import auto
from autotune.tuning import replay as R
from autotune.tuning.landscape import load_landscape


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("settings", nargs="*", help="NAME=VALUE of autotune.search.auto's constants")
    ap.add_argument("--no-transfer", action="store_true", help="an empty store (no other shapes)")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--evaluations", type=int, default=40)
    ap.add_argument("--kernel", default="bench/kernels/gemm_fp8_wave2.py")
    args = ap.parse_args()
    for setting in args.settings:
        name, value = setting.split("=", 1)
        old = getattr(auto, name)  # an unknown name fails here, not silently
        setattr(auto, name, value if isinstance(old, str) else type(old)(value))
    files = sorted(glob.glob("bench/landscapes/gemm_fp8_*.json")) + sorted(
        glob.glob("bench/landscapes/wave2/gemm_fp8_*.json")
    )
    lands = [load_landscape(f) for f in files]
    with R.kernel_features(args.kernel) as features_for:
        runs = R.replay(
            lands,
            ["auto"],
            args.evaluations,
            range(args.seeds),
            transfer=not args.no_transfer,
            features_for=features_for,
        )
    for budget in (10, 20, args.evaluations):
        per: dict[str, list[float]] = {}
        for r in runs:
            per.setdefault(r.shape_key, []).append(r.regret(budget))
        shapes = " ".join(f"{statistics.fmean(v) * 100:.1f}" for v in per.values())
        print(budget, f"{statistics.fmean(r.regret(budget) for r in runs) * 100:.2f}", shapes)


if __name__ == "__main__":
    main()
