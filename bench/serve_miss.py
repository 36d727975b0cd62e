"""A production process's miss, tuned by a running ``autotune serve`` and then served tuned by that same
process (issue 23's "within 60 s + the search's own time"): asks ``best_config(..., record=True)`` for a
shape nobody tuned, keeps asking every 0.2 s (as kernel code would on each call), and prints how long it took
until the answer came from a tuned row of that exact shape.

    AUTOTUNE_DB=sqlite:////tmp/serve.db python bench/serve_miss.py gemm_fp8 M=4096,N=2112,K=7168 --timeout 300
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("kernel")
    ap.add_argument("shape", help="M=..,N=..,K=..")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    shape = {k: int(v) for k, v in (p.split("=") for p in args.shape.split(","))}
    # Kernel code has torch loaded and CUDA initialized before it asks: the lookup takes the device from the
    # torch already imported (it never imports torch itself), so without this the miss would be recorded for
    # the CPU and no GPU service would take it (the first H100 run of bench/gpu_serve.sh did exactly that).
    import torch

    if torch.cuda.is_available():
        torch.zeros(1, device="cuda")

    t_import = time.monotonic()
    from autotune.runtime.lookup import best_config_match

    t0 = time.monotonic()
    answers: list[tuple[float, str]] = []
    how = ""
    calls = 0
    while time.monotonic() - t0 < args.timeout:
        config, how, _ = best_config_match(args.kernel, default={"default": True}, record=True, **shape)
        calls += 1
        if not answers or answers[-1][1] != how:
            answers.append((round(time.monotonic() - t0, 2), how))
            print(f"{time.monotonic() - t0:7.2f} s  {how:8s} {config}", flush=True)
        if how == "exact":
            break
        time.sleep(0.2)
    result = {
        "kernel": args.kernel,
        "shape": shape,
        "import_s": round(t0 - t_import, 3),
        "tuned": how == "exact",
        "seconds_to_tuned": round(time.monotonic() - t0, 2) if how == "exact" else None,
        "answers": answers,
        "calls": calls,
    }
    print(json.dumps(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
