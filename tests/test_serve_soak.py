"""``bench/serve_soak.py`` runs end to end, shortened: its own Postgres on 127.0.0.1, two services, a restart
of Postgres, a service killed with -9, a SIGHUP; nothing lost, measured twice or left running (issue 45).
The figures of the full soak (10 minutes) are in docs/benchmarks.md."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_a_short_soak_loses_nothing_and_leaves_no_process(tmp_path):
    if not list(Path("/usr/lib/postgresql").glob("*/bin/initdb")) and shutil.which("apt-get") is None:
        pytest.skip("no Postgres server binaries, and no apt-get to install them")
    from bench import serve_soak

    args = ["--minutes", "1", "--requests", "6", "--services", "2", "--clients", "1", "--idle-window", "3"]
    code = serve_soak.main([*args, "--pg-port", str(_free_port()), "--out", str(tmp_path)])
    result = json.loads((tmp_path / "serve_soak" / "serve_soak.json").read_text())
    assert result["recorded"] == 6 and result["lost"] == [], result
    assert result["duplicates"] == 0 and result["orphans"] == [], result
    assert [e[1] for e in result["events"]] == [
        "restart postgres", "kill -9 service 0", "SIGHUP service 1", "restart postgres",
    ]  # fmt: skip
    assert code == 0 and result["exit_codes"] == [0, 0], result
