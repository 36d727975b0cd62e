"""Where a timing worker's time per config goes (issue 20): the worker's own code (``engine.worker``'s
``_Evaluation``) on a GPU, per config: the compile call (a Triton disk-cache hit, as after the compile pool),
the check, the measurement; plus the process's one-time costs (loading the kernel file, ``bench.warm_up``).

    python bench/startup_probe.py fill --shape M=2048,N=2112,K=7168 --configs 40   # compile into the cache
    python bench/startup_probe.py time --shape M=2048,N=2112,K=7168 --configs 40   # a fresh process times

Prints a table; ``--json`` writes the figures."""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _configs(space, facts, n: int) -> list[dict]:
    valid = [c for c in space.enumerate(facts) if c.get("IMPL", "triton") == "triton"]
    return random.Random(0).sample(valid, min(n, len(valid)))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["fill", "time"])
    p.add_argument("--kernel", default=str(ROOT / "examples" / "gemm_fp8.py"))
    p.add_argument("--shape", default="M=2048,N=2112,K=7168")
    p.add_argument("--configs", type=int, default=40)
    p.add_argument("--num-tests", type=int, default=30)
    p.add_argument("--json")
    a = p.parse_args()
    t0 = time.perf_counter()
    from autotune.engine.messages import Job
    from autotune.engine.worker import _Evaluation, _load
    from autotune.shapes import parse_shape
    from autotune.space import Space
    from autotune.trial import TrialResult, TrialStatus

    loaded, info = _load(a.kernel, "cuda")
    t_load = time.perf_counter() - t0
    shape = parse_shape(a.shape)
    space = Space.from_dict(info.meta.space)
    configs = _configs(space, info.facts, a.configs)
    ev = _Evaluation(loaded, info.device)
    ev.prepare(shape)
    if a.mode == "fill":
        for c in configs:
            ev.compile(Job("compile", c, shape, 0), TrialResult(TrialStatus.OK, c))
        print(f"compiled {len(configs)} configs")
        return
    from autotune.bench import warm_up

    t1 = time.perf_counter()
    warm = warm_up("cuda")
    t_warm = time.perf_counter() - t1
    rows = []
    for c in configs:
        job = Job("eval", c, shape, a.num_tests)
        s0 = time.perf_counter()
        launcher, res = ev.compile(job, TrialResult(TrialStatus.OK, c))
        s1 = time.perf_counter()
        if launcher is None:
            continue
        out = launcher()
        ev._sync()
        loaded.compare(out, ev.ref)
        s2 = time.perf_counter()
        res = ev.run(job, launcher, res)
        s3 = time.perf_counter()
        rows.append({"compile_s": s1 - s0, "check_s": s2 - s1, "run_s": s3 - s2, "status": res.status.value})
    med = {k: statistics.median(r[k] for r in rows) for k in ("compile_s", "check_s", "run_s")}
    result = {"load_s": t_load, "warm_up_s": t_warm, "warm_up_reported_s": warm, "configs": len(rows), **med}
    result["per_config_s"] = sum(med.values())
    if a.json:
        Path(a.json).write_text(json.dumps({"summary": result, "rows": rows}, indent=2))
    print("startup_probe (one timing worker process, Triton disk cache filled by another process):")
    for k, v in result.items():
        print(f"  {k:22s} {v:.4f}" if isinstance(v, float) else f"  {k:22s} {v}")
    print("  (run_s = ev.run: the check again + bench_kineto_detailed; per_config_s double-counts the check)")


if __name__ == "__main__":
    main()
