"""The report: HTML (plotly, self-contained), Markdown and JSON from one document; the HTML opened in a
real headless Chromium (Debian's package, installed by .ci/setup): the plots render, no console message."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from autotune.jobs.report import parse_since, write_report
from autotune.store import Store

sys.path.insert(0, str(Path(__file__).parent))
from test_nightly_sim import NoisyKernel, job, run  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """Two nightly runs (tune, then verify) and a report of them, in a SQLite file: made once, the tests
    only read them."""
    tmp = tmp_path_factory.mktemp("reported")
    url = f"sqlite:///{tmp / 'autotune.db'}"
    kernel = NoisyKernel()
    run(job(url, tmp), kernel)
    second = run(job(url, tmp), kernel)
    files = write_report(url, tmp / "report", run_id=second.run_id)
    return {p.name: p for p in files}, second, url


def test_report_files_agree(reported):
    files, second, _ = reported
    assert sorted(files) == ["report.html", "report.json", "report.md"]
    doc = json.loads(files["report.json"].read_text())
    assert doc["run"]["run_id"] == second.run_id
    assert len(doc["shapes"]) == 3 and len(doc["runs"]) == 2
    for s in doc["shapes"]:
        assert s["best_s"] and s["speedup_default"] > 1.0
        assert s["last_verification"]["status"] == "ok"
        assert s["versions"][-1]["history"]
        # every number a statistic: the best's samples and interval, the speedup's paired interval
        assert s["best_samples"] >= 3 and s["best_interval_s"][0] <= s["best_s"] <= s["best_interval_s"][1]
        low, high = s["speedup_interval"]
        assert low <= s["speedup_default"] <= high and s["speedup_pairs"] == 10  # the verification's rounds
    md = files["report.md"].read_text()
    assert "## Regressions\n\nNone." in md
    for s in doc["shapes"]:
        assert f"| {s['kernel']} | {s['shape']} |" in md
        assert f", n={s['best_samples']}" in md
    html = files["report.html"].read_text()
    # plotly.js from the one shared copy beside the reports, nothing fetched from the network
    (src,) = re.findall(r"<script[^>]+src='([^']+)'", html)
    assert (
        re.fullmatch(r"plotly-[0-9.]+\.min\.js", src)
        and "Plotly" in (files["report.html"].parent / src).read_text()
    )
    assert len(html) < 500_000  # not 4.8 MB of plotly.js per report
    assert html.count("plotly-graph-div") == 1 + len(doc["shapes"])
    # error bars on the speedups; positive quantities' axes start at 0; charts named for what they hold
    assert '"error_y"' in html and '"rangemode":"tozero"' in html and "last search" not in html
    assert "every search of the current version" in html
    # the HTML has the Markdown's tables, the Markdown the configs
    for title in ("Best configs", "Failures by status"):
        assert (f"## {title}" in md) == (f"<h2>{title}</h2>" in html)
    assert "<h2>Best configs</h2>" in html
    for s in doc["shapes"]:
        config = ",".join(f"{k}={v}" for k, v in s["best_config"].items())
        assert config in md.replace("\\", "") and config in html


def test_report_cli_and_since(reported, tmp_path):
    sqlite_url = reported[2]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "autotune",
            "report",
            "--db",
            sqlite_url,
            "--since",
            "7d",
            "--out",
            str(tmp_path / "r2"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "r2" / "report.html").is_file()
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "autotune",
            "report",
            "--db",
            sqlite_url,
            "--since",
            "yesterday",
            "--out",
            "x",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert bad.returncode == 2 and "--since 'yesterday'" in bad.stderr and bad.stderr.count("\n") == 1
    assert parse_since("2026-12-01").tzinfo is not None


def test_the_shared_plotly_js_is_written_once(reported, tmp_path):
    files, second, url = reported
    write_report(url, tmp_path / "r", run_id=second.run_id)
    (js,) = (tmp_path / "r").glob("plotly-*.min.js")
    stamp = js.stat().st_mtime_ns
    write_report(url, tmp_path / "r", run_id=second.run_id)
    assert js.stat().st_mtime_ns == stamp and len(list((tmp_path / "r").glob("plotly-*"))) == 1


def test_status_colours_are_fixed_across_reports():
    from autotune.jobs.report.html import STATUS_COLOURS, _status_traces

    one = _status_traces([{"counts": {"timeout": 1, "ok": 5}}])[0]
    two = _status_traces([{"counts": {"crashed": 2, "ok": 1, "timeout": 3}}])[0]
    colour = {}
    for bar in (one, two):
        for status, c in zip(bar.x, bar.marker.color, strict=True):
            assert colour.setdefault(status, c) == c == STATUS_COLOURS[status]
    assert list(two.x) == ["ok", "timeout", "crashed"]  # the statuses' own order, not alphabetical


def test_report_of_an_empty_database(sqlite_url, tmp_path):
    Store(sqlite_url).schema.upgrade()
    files = write_report(sqlite_url, tmp_path / "empty")
    assert "None." in files[1].read_text()


# ------------------------------------------------------------------ the browser


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        msg = "chromium is not installed (bash .ci/setup installs Debian's package)"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {msg}", pytrace=False)
        pytest.skip(msg)
    return exe


def _browse(page: Path, *args: str) -> subprocess.CompletedProcess:
    """Load ``page`` in headless Chromium; console messages are printed on stderr as INFO:CONSOLE lines."""
    return subprocess.run(
        [
            _chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=20000",
            f"--user-data-dir={page.parent / '.chromium'}",
            *args,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _console(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def _png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, RGB(A) rows) of a non-interlaced 8-bit PNG, as Chromium writes screenshots."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def test_console_errors_are_caught(tmp_path):
    """The check below can fail: a page that logs or throws is seen."""
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>console.error('boom'); notAFunction();</script></body></html>")
    proc = _browse(page, "--dump-dom")
    console = _console(proc.stderr)
    assert any("boom" in line for line in console) and any("notAFunction" in line for line in console)


def test_report_renders_in_headless_chromium(reported, tmp_path):
    files, _, _ = reported
    page = files["report.html"]
    doc = json.loads(files["report.json"].read_text())
    dom = _browse(page, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert _console(dom.stderr) == []
    # plotly drew every figure: an svg per figure, with the traces' points in it
    figures = 1 + len(doc["shapes"])
    rendered = re.findall(
        r'<div id="plot-[^"]+" class="plotly-graph-div[^>]*>.*?class="main-svg"', dom.stdout
    )
    assert len(rendered) == figures
    assert dom.stdout.count('class="point"') >= figures and 'class="trace scatter' in dom.stdout
    shot = tmp_path / "shot.png"
    proc = _browse(page, f"--screenshot={shot}", "--window-size=1400,1200")
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-2000:]
    assert _console(proc.stderr) == []
    # every panel names its axes, and the optimization history's time axis is logarithmic (read from the
    # page plotly drew: a script appended to a copy of the page writes the figures' axes into the DOM)
    probe = page.with_name("probe.html")
    probe.write_text(
        page.read_text().replace(
            "</body>",
            "<script>window.addEventListener('load', () => { const axes = [];"
            " for (const d of document.querySelectorAll('.plotly-graph-div')) {"
            " for (const [k, a] of Object.entries(d._fullLayout)) {"
            " if (/^[xy]axis\\d*$/.test(k)) axes.push([d.id, k, a.type, a.title && a.title.text]); } }"
            " document.body.setAttribute('data-axes', JSON.stringify(axes)); });</script></body>",
        )
    )
    probed = _browse(probe, "--dump-dom")
    assert probed.returncode == 0 and _console(probed.stderr) == [], probed.stderr[-2000:]
    (raw,) = re.findall(r'data-axes="([^"]*)"', probed.stdout)
    axes = json.loads(raw.replace("&quot;", '"').replace("&amp;", "&"))
    assert len(axes) == 2 + 8 * len(doc["shapes"])  # the summary's two, four panels' two per shape
    assert all(title for _, _, _, title in axes), [a for a in axes if not a[3]]
    history = [a for a in axes if a[1] == "yaxis3"]
    assert len(history) == len(doc["shapes"]) and all(t == "log" for _, _, t, _ in history)
    # the time panel: minutes as categories (one point, or points seconds apart, stay readable)
    assert all(t == "category" for fig, k, t, _ in axes if k == "xaxis" and fig != "plot-summary")
    width, height, rows = _png_pixels(shot)
    # the summary plot's area (below the heading and the tables) is not blank: many distinct colours
    colours = {row[x : x + 3] for row in rows[height // 3 :] for x in range(0, width * 3, 12)}
    assert len(colours) > 20, len(colours)
