"""Soak of ``autotune serve`` (issue 45): services on one Postgres while clients record misses, Postgres
restarts, a service is killed with -9 and another reloaded with SIGHUP. CPU only, loopback only, bounded in
time: its own throwaway Postgres cluster on 127.0.0.1 (``.ci/start-postgres.sh``), the CPU test kernel
``tests/kernels/tiny.py`` (2 evaluations a request).

Timeline over ``--minutes`` (the clients record their misses evenly over the first 80 %):

- before any request: the idle transaction rate of the services (``pg_stat_database``, ``--idle-window`` s);
- 20 %: Postgres restarted (fast shutdown: every connection cut); 45 %: service 0 killed with -9 and a new
  one started; 60 %: SIGHUP to service 1; 75 %: Postgres restarted again;
- then the queue drains, and the idle rate is measured again.

Reported: requests lost (recorded by a client and not tuned), measurements stored twice (one config of one
key), processes left by the killed service and by the stopped ones, the idle transaction rate before and
after, the services' exit codes, and how long a client waited from its miss until ``best_config`` answered
``exact`` in the same process.

    python -m bench serve_soak                       # the full soak (10 min)
    python -m bench serve_soak --minutes 2 --requests 40
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "kernels" / "tiny.py"
#: small searches: the soak is about the service, not the search
SERVICE_ENV = {"AUTOTUNE_TRIALS": "2", "AUTOTUNE_RETIME_TOP": "0", "AUTOTUNE_NUM_TESTS": "3"}

CLIENT = r"""
import json, sys, time
from autotune.runtime.lookup import best_config_match
url, shapes, pace, deadline = sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
missed, exact, next_miss = {}, {}, time.time()
while (len(missed) < len(shapes) or len(exact) < len(missed)) and time.time() < deadline:
    if len(missed) < len(shapes) and time.time() >= next_miss:  # a new shape production asks for
        n = shapes[len(missed)]
        best_config_match("tiny", db=url, device="cpu", record=True, N=n)
        missed[n], next_miss = time.time(), next_miss + pace
    for n in missed:  # production asks again: served tuned once the lookup sees the new best
        if n not in exact and best_config_match("tiny", db=url, device="cpu", record=True, N=n)[1] == "exact":
            exact[n] = time.time() - missed[n]
    time.sleep(0.1)
print(json.dumps({"recorded": len(missed), "exact_after_s": exact}))
"""


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    out = Path(args.out or os.environ.get("OUT") or ".out/bench") / "serve_soak"
    out.mkdir(parents=True, exist_ok=True)
    with _Cluster(args.pg_port) as pg:
        result = _soak(args, pg, out)
    (out / "serve_soak.json").write_text(json.dumps(result, indent=2, default=str))
    _table(result)
    ok = not result["lost"] and not result["duplicates"] and not result["orphans"]
    return 0 if ok and all(c == 0 for c in result["exit_codes"]) else 1


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench serve_soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=10.0, help="the soak's span (default 10)")
    p.add_argument("--requests", type=int, default=200, help="distinct shapes the clients miss (default 200)")
    p.add_argument("--services", type=int, default=3)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--idle-window", type=float, default=30.0, help="seconds of each idle-rate measurement")
    p.add_argument("--pg-port", type=int, default=55446, help="port of the soak's own Postgres (127.0.0.1)")
    p.add_argument("--out", default=None, help="results folder (default: $OUT, else .out/bench)")
    return p.parse_args(argv)


# ---------------------------------------------------------------- the soak


def _soak(args: argparse.Namespace, pg: _Cluster, out: Path) -> dict[str, Any]:
    from autotune.store import Store

    Store.open(pg.url, create=True).close()
    span = args.minutes * 60
    services = [_Service(i, pg.url, out) for i in range(args.services)]
    for s in services:
        s.wait_for("serving", 600)
    idle_before = _idle_rate(pg.url, args.idle_window)
    t0 = time.time()
    clients = _start_clients(args, pg.url, t0 + span * 0.8, t0 + span + 600)
    events: list[tuple[float, str]] = []
    plan = [(0.2, "restart postgres"), (0.45, "kill -9 service 0"), (0.6, "SIGHUP service 1")]
    plan.append((0.75, "restart postgres"))
    orphans: list[str] = []
    for at, what in plan:
        time.sleep(max(0.0, t0 + span * at - time.time()))
        events.append((round(time.time() - t0, 1), what))
        if what == "restart postgres":
            pg.restart()
        elif what.startswith("kill"):
            orphans += services[0].kill9()
            services.append(_Service(len(services), pg.url, out))
        else:
            services[1].proc.send_signal(signal.SIGHUP)
    waits = [json.loads(c.communicate()[0].strip().splitlines()[-1]) for c in clients]
    drained_at = _drain(pg.url, args.requests, t0 + span + 600)
    time.sleep(15)  # the last searches' writes and the services' pools settle
    idle_after = _idle_rate(pg.url, args.idle_window)
    exit_codes = [s.stop() for s in services if s.proc.returncode is None or s.proc.returncode >= 0]
    orphans += [p for s in services for p in s.survivors()]
    return _summary(
        args, pg.url, services, waits, events, orphans, exit_codes, idle_before, idle_after, drained_at - t0
    )


def _start_clients(args: argparse.Namespace, url: str, record_until: float, deadline: float) -> list[Any]:
    shapes = [16 + i for i in range(args.requests)]
    mine = [shapes[i :: args.clients] for i in range(args.clients)]
    pace = (record_until - time.time()) / max(1, max(len(m) for m in mine))
    return [
        subprocess.Popen(
            [sys.executable, "-c", CLIENT, url, json.dumps(m), str(pace), str(deadline)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            text=True,
        )
        for m in mine
    ]


def _drain(url: str, requests: int, deadline: float) -> float:
    """When every request was tuned (or the deadline came)."""
    from autotune.store import Store

    with Store(url) as store:
        while time.time() < deadline:
            rows = store.requests.recorded("tiny")
            if len(rows) >= requests and all(r.status in ("done", "refused") for r in rows):
                break
            time.sleep(1)
    return time.time()


def _summary(args, url, services, waits, events, orphans, exit_codes, idle_before, idle_after, drain_s):  # noqa: ANN001
    from autotune.store import Store

    with Store(url) as store:
        rows = {r.shape_key: r for r in store.requests.recorded("tiny")}
        duplicates = store.trials.duplicate_measurements()
    lost = [
        f"N={16 + i}"
        for i in range(args.requests)
        if getattr(rows.get(f"N={16 + i}"), "status", "") != "done"
    ]
    latencies = sorted(float(v) for w in waits for v in w["exact_after_s"].values())
    return {
        "minutes": args.minutes,
        "requests": args.requests,
        "services": args.services,
        "clients": args.clients,
        "recorded": sum(w["recorded"] for w in waits),
        "lost": lost,
        "refused": sorted(k for k, r in rows.items() if r.status == "refused"),
        "duplicates": duplicates,
        "orphans": orphans,
        "exit_codes": exit_codes,
        "events": events,
        "drained_after_s": round(drain_s, 1),
        "idle_tx_per_s_before": round(idle_before, 2),
        "idle_tx_per_s_after": round(idle_after, 2),
        "miss_to_exact_s": {
            "n": len(latencies),
            "median": round(statistics.median(latencies), 1) if latencies else None,
            "p90": round(latencies[int(0.9 * (len(latencies) - 1))], 1) if latencies else None,
            "max": round(latencies[-1], 1) if latencies else None,
        },
        "service_events": {s.name: s.counts() for s in services},
    }


def _table(r: dict[str, Any]) -> None:
    lat = r["miss_to_exact_s"]
    rows = [
        ("requests recorded / tuned", f"{r['recorded']} / {r['recorded'] - len(r['lost'])}"),
        ("lost requests", str(len(r["lost"]))),
        ("refused requests", str(len(r["refused"]))),
        ("duplicate measurements", str(r["duplicates"])),
        ("orphan processes", str(len(r["orphans"]))),
        ("service exit codes (SIGTERM)", ",".join(map(str, r["exit_codes"]))),
        ("idle transactions/s before / after", f"{r['idle_tx_per_s_before']} / {r['idle_tx_per_s_after']}"),
        ("miss -> exact in the client (s)", f"median {lat['median']}, p90 {lat['p90']}, max {lat['max']}"),
        ("queue drained after (s)", str(r["drained_after_s"])),
    ]
    width = max(len(k) for k, _ in rows)
    print(
        f"serve soak: {r['services']} services, {r['clients']} clients, {r['minutes']:g} min; {r['events']}"
    )
    for k, v in rows:
        print(f"  {k:<{width}}  {v}")


# ---------------------------------------------------------------- Postgres, services, processes


def _idle_rate(url: str, window_s: float) -> float:
    """Transactions per second in the database while nothing is asked (the soak's own reads excluded)."""

    def total() -> int:
        import psycopg

        with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as c:
            return int(
                c.execute("SELECT sum(xact_commit + xact_rollback) FROM pg_stat_database").fetchone()[0]
            )

    time.sleep(11)  # an idle backend reports its counts within 10 s (PGSTAT_IDLE_INTERVAL)
    first = total()
    time.sleep(window_s)
    return max(0, total() - first - 1) / window_s


class _Cluster:
    """A throwaway Postgres on 127.0.0.1 (``.ci/start-postgres.sh``), restartable."""

    def __init__(self, port: int) -> None:
        self.env = {**os.environ, "AUTOTUNE_PG_PORT": str(port)}
        self.data = Path(os.environ.get("TMPDIR", "/tmp")) / f"autotune-pg-{port}" / "data"

    def __enter__(self) -> _Cluster:
        line = subprocess.run(
            ["bash", str(ROOT / ".ci" / "start-postgres.sh")],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        self.url = line.split("=", 1)[1]
        return self

    def restart(self) -> None:
        bin_dir = sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1]
        log = self.data.parent / "server.log"
        cmd = [str(bin_dir / "pg_ctl"), "-D", str(self.data), "-l", str(log), "-m", "fast", "-w", "-t", "60"]
        if os.getuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        # the new server must not hold this process's pipes: its output goes to the server log
        subprocess.run([*cmd, "restart"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def __exit__(self, *exc: object) -> None:
        subprocess.run(
            ["bash", str(ROOT / ".ci" / "start-postgres.sh"), "stop"], env=self.env, capture_output=True
        )


class _Service:
    """One ``autotune serve`` process with its JSON log, and the processes it started."""

    def __init__(self, n: int, url: str, out: Path) -> None:
        self.name = f"service{n}"
        self.log_path = out / f"{self.name}.log"
        cmd = [
            sys.executable,
            "-m",
            "autotune",
            "serve",
            "--kernels",
            str(TINY),
            "--devices",
            "cpu",
            "--db",
            url,
        ]
        self.proc = subprocess.Popen(
            [*cmd, "--log-format", "json"],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **SERVICE_ENV},
            stdout=subprocess.DEVNULL,
            stderr=self.log_path.open("w"),
            start_new_session=True,
        )
        self.children: set[int] = set()

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.log_path.read_text().splitlines() if x.startswith("{")]

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for e in self.events():
            counts[e["event"]] = counts.get(e["event"], 0) + 1
        return counts

    def wait_for(self, event: str, timeout_s: float) -> None:
        deadline = time.time() + timeout_s
        while not any(e["event"] == event for e in self.events()):
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"{self.name}: no {event!r}: {self.log_path.read_text()[-2000:]}")
            time.sleep(0.5)
        self.children |= _descendants(self.proc.pid)

    def kill9(self) -> list[str]:
        """kill -9 (the service alone, not its group); what it started and is alive 30 s later."""
        self.children |= _descendants(self.proc.pid)
        self.proc.kill()
        self.proc.wait()
        time.sleep(30)
        return self.survivors()

    def stop(self) -> int:
        self.children |= _descendants(self.proc.pid)
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def survivors(self) -> list[str]:
        time.sleep(1)
        left = [p for p in self.children if _alive(p)]
        for p in left:  # reported, and not left on the machine
            os.kill(p, signal.SIGKILL)
        return [f"{self.name}: pid {p}" for p in left]


def _descendants(pid: int) -> set[int]:
    found: set[int] = set()
    todo = [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*"):
            try:
                kids = {int(k) for k in (task / "children").read_text().split()}
            except OSError:
                continue
            todo += list(kids - found)
            found |= kids
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


if __name__ == "__main__":
    raise SystemExit(main())
