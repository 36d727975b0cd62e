"""`autotune serve` latency: start, handed-over searches against --local, a request, a miss, SIGTERM.

`autotune serve` latency: seconds to serving, a search handed to a warm service against the same search
in its own process (``--local``), a request tuned, a production miss served tuned to the same process, SIGTERM.

    python -m bench serve_latency --device cpu     # the CPU example (examples/matmul_cpu.py), any machine
    python -m bench serve_latency                  # gemm_fp8 on the first GPU

One service on a fresh SQLite file; every search is a whole command, cold (a ``--local`` one has its own
database and Triton cache). The miss is a child process asking ``best_config(..., record=True)`` every
0.2 s, as kernel code would, until the answer is the tuned row of its exact shape."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import GEMM_FP8, MATMUL_CPU, ROOT, autotune, cold_env, finish, out_dir, parser

#: per device: the kernel file, the shapes of each step, and the handed-over search's larger budget
PLANS = {
    "cpu": {
        "kernel": MATMUL_CPU,
        "name": "matmul_cpu",
        "one": ("M=64,N=64,K=32", "M=64,N=32,K=64"),
        "many": ("M=128,N=64,K=64", "M=64,N=128,K=64"),
        "trials": 10,
        "request": "M=96,N=96,K=96",
        "miss": "M=80,N=80,K=80",
        "stop": "M=256,N=256,K=256",
    },
    "cuda": {
        "kernel": GEMM_FP8,
        "name": "gemm_fp8",
        "one": ("M=1024,N=2112,K=7168", "M=1024,N=4096,K=7168"),
        "many": ("M=512,N=2112,K=7168", "M=512,N=4096,K=7168"),
        "trials": 40,
        "request": "M=2048,N=2112,K=7168",
        "miss": "M=4096,N=2112,K=7168",
        "stop": "M=8192,N=2112,K=7168",
    },
}


def wait_for(pattern: str, log: Path, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if log.exists() and re.search(pattern, log.read_text()):
            return True
        time.sleep(0.1)
    return False


def miss(kernel: str, shape_text: str, timeout: float) -> int:
    """The child: a production process's miss, asked again every 0.2 s until it is served tuned."""
    shape = {k: int(v) for k, v in (p.split("=") for p in shape_text.split(","))}
    import torch  # kernel code has torch loaded (the lookup takes the device from it) and CUDA initialized

    if torch.cuda.is_available():
        torch.zeros(1, device="cuda")
    from autotune.runtime.lookup import best_config_match

    t0 = time.monotonic()
    how = ""
    while time.monotonic() - t0 < timeout:
        _, how, _ = best_config_match(kernel, default={"default": True}, record=True, **shape)
        if how == "exact":
            break
        time.sleep(0.2)
    print(json.dumps({"tuned": how == "exact", "seconds_to_tuned": round(time.monotonic() - t0, 2)}))
    return 0 if how == "exact" else 1


def searches(plan: dict[str, Any], db: str, out: Path, device: str) -> list[dict[str, Any]]:
    """1- and N-evaluation searches through the service, and the same with --local."""
    rows = []
    for trials, (served, local) in ((1, plan["one"]), (plan["trials"], plan["many"])):
        for mode, shape in (("service", served), ("local", local)):
            name = f"search_{trials}_{mode}"
            where = (
                ["--db", db]
                if mode == "service"
                else ["--local", "--db", f"sqlite:///{out / (name + '.db')}"]
            )
            env = cold_env() if mode == "local" else dict(os.environ)
            argv = [
                "search",
                plan["kernel"],
                "--device",
                device,
                "--shape",
                shape,
                "--trials",
                trials,
                *where,
            ]
            run = autotune(argv, out / f"{name}.log", env=env, timeout=600)
            handed = "handed to autotune serve" in run.log.read_text()
            rows.append(
                {
                    "step": f"{trials}-evaluation search via {mode}",
                    "seconds": run.wall_s,
                    "note": f"exit {run.rc}, handed={handed}",
                }
            )
    return rows


def request_and_miss(plan: dict[str, Any], db: str, log: Path, device: str) -> list[dict[str, Any]]:
    t0 = time.monotonic()
    autotune(
        ["request", plan["kernel"], "--shape", plan["request"], "--device", device, "--db", db],
        log.with_name("request.log"),
        env=dict(os.environ),
    )
    shape_re = plan["request"].replace(",", ".*")
    tuned = wait_for(rf'"event": "tuned".*{shape_re}', log, 600)
    rows = [
        {
            "step": "request -> tuned",
            "seconds": round(time.monotonic() - t0, 2),
            "note": "stopping rule" if tuned else "NOT tuned in 600 s",
        }
    ]
    child = [sys.executable, "-m", "bench", "serve_latency", "--miss", plan["name"], plan["miss"]]
    proc = subprocess.run(
        child, cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, AUTOTUNE_DB=db), timeout=700
    )
    got = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}
    rows.append(
        {
            "step": "miss -> served tuned, same process",
            "seconds": got.get("seconds_to_tuned"),
            "note": f"tuned={got.get('tuned')}",
        }
    )
    return rows


def sigterm(plan: dict[str, Any], db: str, log: Path, serve: subprocess.Popen, device: str) -> dict[str, Any]:
    autotune(
        ["request", plan["kernel"], "--shape", plan["stop"], "--device", device, "--db", db],
        log.with_name("request_stop.log"),
        env=dict(os.environ),
    )
    wait_for(rf'"event": "tuning".*{plan["stop"].split(",")[0]}', log, 120)
    time.sleep(1)
    t0 = time.monotonic()
    serve.send_signal(signal.SIGTERM)
    rc = serve.wait(timeout=120)
    return {
        "step": "SIGTERM during a search -> exit",
        "seconds": round(time.monotonic() - t0, 2),
        "note": f"exit {rc}",
    }


def main(argv: list[str] | None = None) -> int:
    ap = parser("serve_latency", __doc__)
    ap.add_argument("--device", default="cuda", choices=sorted(PLANS))
    ap.add_argument("--miss", nargs=2, metavar=("KERNEL", "SHAPE"), help="(internal) the production process")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = ap.parse_args(argv)
    if args.miss:
        return miss(*args.miss, timeout=600)
    plan = PLANS[args.device]
    out = out_dir(args, "serve_latency")
    db = f"sqlite:///{Path(tempfile.mkdtemp(prefix='bench-serve-')) / 'serve.db'}"
    if args.device == "cpu":  # the CPU example's seconds are its measurements': keep them few
        os.environ.update(AUTOTUNE_RETIME_TOP="0", AUTOTUNE_NUM_TESTS="5")
    autotune(["db", "upgrade", "--db", db], out / "upgrade.log", env=dict(os.environ))
    log = out / "serve.log"
    t0 = time.monotonic()
    cmd = [
        sys.executable,
        "-m",
        "autotune",
        "serve",
        "--kernels",
        str(plan["kernel"]),
        "--devices",
        args.device,
    ]
    with log.open("w") as f:
        serve = subprocess.Popen(
            [*cmd, "--db", db, "--log-format", "json"],
            cwd=ROOT,
            stdout=f,
            stderr=subprocess.STDOUT,
            env=cold_env(),
        )
    try:
        serving = wait_for(r'"event": "serving"', log, 600)
        rows = [
            {
                "step": "start -> serving",
                "seconds": round(time.monotonic() - t0, 2),
                "note": "" if serving else "NOT serving",
            }
        ]
        if serving:
            rows += searches(plan, db, out, args.device)
            rows += request_and_miss(plan, db, log, args.device)
            rows.append(sigterm(plan, db, log, serve, args.device))
    finally:
        if serve.poll() is None:
            serve.kill()
    finish("serve_latency", out, {"device": args.device, "steps": rows}, argv, rows)
    return 0 if serving else 1


if __name__ == "__main__":
    sys.exit(main())
