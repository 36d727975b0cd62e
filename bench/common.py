"""What the benchmarks share: the ``--out`` folder, `autotune` run as a user runs it (whole command timed, a
cold Triton cache), the machine's name, the JSON record (GPU, date, commit, command) and the closing table."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
GEMM_FP8 = ROOT / "examples" / "gemm_fp8.py"
MATMUL_CPU = ROOT / "examples" / "matmul_cpu.py"


def parser(name: str, doc: str | None) -> argparse.ArgumentParser:
    """An argument parser with the suite's ``--out`` (default ``$OUT``, else ``.out/bench``)."""
    ap = argparse.ArgumentParser(
        prog=f"python -m bench {name}",
        description=(doc or "").strip().split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument(
        "--out", type=Path, default=Path(os.environ.get("OUT") or ".out/bench"), help="results folder"
    )
    return ap


def out_dir(args: argparse.Namespace, name: str) -> Path:
    """``--out``/NAME, created."""
    path = Path(args.out) / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def machine() -> str:
    """The GPU's name as nvidia-smi gives it (with the driver), else ``cpu`` and the host's core count."""
    try:
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    return f"cpu ({os.cpu_count()} cores)"


def commit() -> str:
    """The checkout's commit (``AUTOTUNE_COMMIT`` where the tree travelled without .git)."""
    if os.environ.get("AUTOTUNE_COMMIT"):
        return os.environ["AUTOTUNE_COMMIT"]
    try:
        proc = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        return proc.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def write_json(out: Path, name: str, results: Any, argv: Sequence[str]) -> Path:
    """``out/NAME.json``: the results with where and when they were measured, and the command."""
    record = {
        "benchmark": name,
        "machine": machine(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit(),
        "command": shlex.join(["python", "-m", "bench", name, *argv]),
        "results": results,
    }
    path = out / f"{name}.json"
    path.write_text(json.dumps(record, indent=1, default=str))
    return path


def table(rows: Sequence[dict[str, Any]], title: str = "") -> str:
    """A plain-text table of ``rows`` (the keys of the first row are the columns); floats to 4 digits."""
    if not rows:
        return f"{title}\n(no rows)"
    cols = list(rows[0])

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4g}"
        return "-" if v is None else str(v)

    cells = [[cell(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = [title] if title else []
    lines.append("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


@dataclass(frozen=True)
class Run:
    """One command: its exit status, whole-command seconds and log file."""

    rc: int
    wall_s: float
    log: Path


def cold_env(**extra: str) -> dict[str, str]:
    """The environment of a cold command: a fresh Triton cache, unbuffered output."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", **extra)
    env["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-triton-")
    return env


def autotune(
    argv: Sequence[str], log: Path, *, env: dict[str, str] | None = None, timeout: float = 600
) -> Run:
    """``python -m autotune ARGV`` as a user runs it, timed whole; output to ``log``."""
    t0 = time.perf_counter()
    with log.open("w") as f:
        try:
            rc = subprocess.run(
                [sys.executable, "-m", "autotune", *map(str, argv)],
                cwd=ROOT,
                stdout=f,
                stderr=subprocess.STDOUT,
                env=env or cold_env(),
                timeout=timeout,
            ).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    return Run(rc, round(time.perf_counter() - t0, 2), log)


def search_report(path: Path) -> dict[str, Any] | None:
    """The first shape's report of ``autotune search --json``, or None where the search wrote none."""
    try:
        return json.loads(path.read_text())[0]
    except (OSError, ValueError, IndexError):
        return None


def finish(name: str, out: Path, results: Any, argv: Sequence[str], rows: Sequence[dict[str, Any]]) -> int:
    """Write the JSON, print the table last; 0 when every row ran."""
    path = write_json(out, name, results, argv)
    print(table(rows, f"{name} on {machine()} (full results: {path})"))
    return 0
