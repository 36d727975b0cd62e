"""Turn the recorded H200 data in bench/results/ and bench/landscapes/ into the tables of bench/RESULTS.md.

python bench/summarize.py            # prints markdown
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent


def shape_key(s: dict) -> str:
    return f"{s['M']}x{s['N']}x{s['K']}"


def default_config() -> dict:
    """gemm_fp8's untuned config, from the kernel file itself (imports triton)."""
    import sys

    sys.path.insert(0, str(HERE.parent))
    from autotune.kernel.contract import load_kernel_file

    return dict(load_kernel_file(HERE.parent / "examples" / "gemm_fp8.py").kernel.default_config)


def landscapes() -> dict[str, dict]:
    out = {}
    for p in sorted((HERE / "landscapes").glob("gemm_fp8_*.json")):
        d = json.loads(p.read_text())
        out[shape_key(d["shape"])] = d
    return out


def timer_table() -> str:
    d = json.loads((HERE / "results" / "compare_timers.json").read_text())
    rows = [
        f"GPU {d['gpu']}, L2 {d['l2_bytes'] / 2**20:.0f} MiB, {d['num_tests']} calls per measurement, 5 repeats.\n",
        "| GEMM | impl | kernel | method | mean µs | spread over 5 repeats | wall ms / measurement |",
        "|---|---|---|---|---:|---:|---:|",
    ]
    for c in d["cases"]:
        for meth, v in c["methods"].items():
            if "error" in v:
                rows.append(
                    f"| {c['size']} {shape_key(c['shape'])} | {c['impl']} | `{c['kernel'][0][:28]}` | {meth} | "
                    f"error: {v['error'][:60]} | | |"
                )
                continue
            rows.append(
                f"| {c['size']} {shape_key(c['shape'])} | {c['impl']} | `{c['kernel'][0][:28]}` | {meth} | "
                f"{v['mean_us']:.2f} | {v['spread_pct']:.2f} % | {v['wall_ms']:.1f} |"
            )
    return "\n".join(rows)


def landscape_table() -> str:
    rows = [
        "| shape | valid | ok | failed | best µs | best TFLOP/s | cuBLASLt µs | cuBLASLt TFLOP/s | best / cuBLASLt speed | "
        "median config µs | default µs | best config |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for key, d in landscapes().items():
        ok = [c for c in d["configs"] if c["status"] == "ok"]
        best = min(ok, key=lambda c: c["time_s"])
        flops = 2 * d["shape"]["M"] * d["shape"]["N"] * d["shape"]["K"]
        default = next(
            (c for c in ok if c["config"] == default_config()),
            None,
        )
        cfg = ",".join(f"{k}={v}" for k, v in best["config"].items() if k != "GROUP_M")
        rows.append(
            f"| {key} | {len(d['configs'])} | {len(ok)} | {len(d['configs']) - len(ok)} | {best['time_s'] * 1e6:.2f} | "
            f"{flops / best['time_s'] / 1e12:.0f} | {d['scaled_mm_s'] * 1e6:.2f} | {flops / d['scaled_mm_s'] / 1e12:.0f} | "
            f"{d['scaled_mm_s'] / best['time_s']:.2f}x | {statistics.median(c['time_s'] for c in ok) * 1e6:.1f} | "
            f"{default['time_s'] * 1e6 if default else float('nan'):.1f} | {cfg} |"
        )
    return "\n".join(rows)


def search_table() -> str:
    tpe = json.loads((HERE / "results" / "search_tpe.json").read_text())
    exh = json.loads((HERE / "results" / "search_exh.json").read_text())
    land = landscapes()
    rows = [
        "| shape | TPE: evals (+invalid, +reused) | TPE wall s | TPE best µs | exhaustive evals | exhaustive wall s | "
        "exhaustive best µs | regret (TPE vs exhaustive) | regret vs landscape best | TPE best vs cuBLASLt | "
        "speedup over default | failures |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for t, e in zip(tpe, exh, strict=True):
        key = shape_key(t["shape"])
        tb, eb = t["best"]["time_s"], e["best"]["time_s"]
        lb = min(c["time_s"] for c in land[key]["configs"] if c["status"] == "ok") if key in land else None
        fails = {k: v for k, v in {**t["statuses"], **e["statuses"]}.items() if k not in ("ok", "invalid")}
        rows.append(
            f"| {key} | {t['evaluations']} (+{t['invalid']}, +{t['reused']}) | {t['wall_s']:.1f} | {tb * 1e6:.2f} | "
            f"{e['evaluations']} | {e['wall_s']:.1f} | {eb * 1e6:.2f} | {(tb / eb - 1) * 100:+.2f} % | "
            f"{(tb / lb - 1) * 100:+.2f} % | "
            f"{land[key]['scaled_mm_s'] / tb:.2f}x | {t['speedup']:.2f}x | {fails or 'none'} |"
        )
    return "\n".join(rows)


def replay_table() -> str:
    d = json.loads((HERE / "results" / "replay.json").read_text())
    rows = [
        "| shape | sampler | budget | seeds | median regret | worst regret | within 1 % of the best |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in d["results"]:
        reg = r["regret"]
        rows.append(
            f"| {r['shape']} | {r['sampler']} | {r['budget']} | {r['seeds']} | {statistics.median(reg) * 100:.2f} % | "
            f"{max(reg) * 100:.2f} % | {sum(x <= 0.01 for x in reg)}/{len(reg)} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print("## Timers\n")
    print(timer_table())
    print("\n## Landscape\n")
    print(landscape_table())
    print("\n## Search\n")
    print(search_table())
    print("\n## Replay\n")
    print(replay_table())
