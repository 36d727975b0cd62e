"""The tuning report (``autotune report``, and the end of every nightly run): one content document read
from the store (``data``), rendered as HTML with plotly figures (``html``), as Markdown (``markdown``) and
as JSON. The HTML loads plotly.js from one shared ``plotly-<version>.min.js`` written once beside the
reports (4.8 MB once, not per report; no network)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from autotune.errors import SettingsError
from autotune.files import write_text

if TYPE_CHECKING:
    from autotune.store import Store

__all__ = ["parse_since", "write_report", "written"]


def parse_since(text: str) -> datetime:
    """``7d``, ``24h``, ``30m`` (ago) or an ISO date / date-time (naive = UTC)."""
    m = re.fullmatch(r"\s*(\d+)\s*([dhm])\s*", text)
    if m:
        unit = {"d": "days", "h": "hours", "m": "minutes"}[m.group(2)]
        try:
            return datetime.now(timezone.utc) - timedelta(**{unit: int(m.group(1))})
        except OverflowError:  # older than year 1
            raise SettingsError(f"--since {text!r}: an age that reaches before year 1") from None
    try:
        d = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise SettingsError(
            f"--since {text!r}: expected an ISO date (2026-12-01) or an age (7d, 24h)"
        ) from None
    return d if d.tzinfo else d.replace(tzinfo=timezone.utc)


def write_report(
    db: Store | str | None, out_dir: str | Path, *, since: datetime | None = None, run_id: str | None = None
) -> list[Path]:
    """Write ``report.html``, ``report.md`` and ``report.json`` into ``out_dir``; ``db`` is a Store or a
    database URL/path (None: the default). Returns the paths."""
    import importlib.util

    if importlib.util.find_spec("plotly") is None:
        raise SettingsError("the report needs plotly: pip install plotly (or autotune's own dependencies)")
    from autotune.jobs.report.data import collect
    from autotune.jobs.report.html import plotly_js_name, render_html
    from autotune.jobs.report.markdown import render_markdown
    from autotune.store import Store

    if isinstance(db, Store):
        db.schema.check()
    store = db if isinstance(db, Store) else Store.open(db, readonly=True)
    doc = collect(store, since=since, run_id=run_id)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SettingsError(f"--out {out}: cannot create the folder ({e.strerror or e})") from None
    plotly_js = _write_plotly_js(out, plotly_js_name())
    files = {
        "report.json": json.dumps(doc, indent=1, default=str),
        "report.md": render_markdown(doc),
        "report.html": render_html(doc, plotly_src=plotly_js.name),
    }
    paths = []
    for name, text in files.items():
        path = out / name
        paths.append(write_text(path, text))
    return paths


def written(files: list[Path]) -> str:
    """The reports written, and the plotly.js file report.html loads from beside it (a folder copied
    without it shows no charts): what the "wrote" line names."""
    from autotune.jobs.report.html import plotly_js_name

    names = ", ".join(str(f) for f in files)
    if not files:
        return names
    js = files[0].parent / plotly_js_name()
    size = f", {js.stat().st_size / 1e6:.1f} MB" if js.is_file() else ""
    return f"{names} (report.html loads {js}{size}: keep it beside the report)"


def _write_plotly_js(out: Path, name: str) -> Path:
    """plotly.js beside the reports, written once (every later report of this plotly version shares it)."""
    from plotly.offline import get_plotlyjs

    path = out / name
    text = get_plotlyjs()
    if not path.is_file() or path.stat().st_size != len(text.encode("utf-8")):
        # atomic and with a temporary name of this process: a report opened meanwhile never loads half of
        # it, and two runs writing into one folder never rename each other's temporary file
        write_text(path, text)
    return path
