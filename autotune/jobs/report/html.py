"""The report as HTML: plotly figures (plotly.js from the shared ``plotly-<version>.min.js`` beside it, or
inlined; never the network), the Markdown's tables beside them. Per shape: the best time over versions and
nightly verifications, the speedup over the default config, the optimization history of every search of
the current version
(log time axis: one slow outlier does not squash the rest), failures by status (one colour per status in
every report). Every panel names its axes."""

from __future__ import annotations

import html
import json
from typing import Any

from autotune.jobs.report.markdown import best_text, evaluated, skipped_requests, speedup_text
from autotune.trial import TrialStatus, fmt_config, fmt_time

#: one colour per trial status, the same in every report: a bar's colour never changes meaning
STATUS_COLOURS = {
    TrialStatus.OK.value: "#2ca02c",
    TrialStatus.INVALID.value: "#9e9e9e",
    TrialStatus.COMPILE_FAILED.value: "#ff7f0e",
    TrialStatus.LAUNCH_FAILED.value: "#d62728",
    TrialStatus.WRONG_RESULT.value: "#9467bd",
    TrialStatus.TIMEOUT.value: "#8c564b",
    TrialStatus.CRASHED.value: "#222222",
}
#: (x title, y title) of each per-shape panel, left to right
_AXES = (
    ("version or nightly run (UTC)", "time (ms)"),
    ("version (environment, source)", "speedup (x)"),
    ("trial", "time (ms, log scale)"),
    ("status", "configs"),
)

_STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}
th{background:#f3f3f3}.regression{color:#b00;font-weight:bold}.plot{margin:8px 0 24px}
h2{border-bottom:1px solid #ddd;padding-bottom:4px}
"""


def _ms(t: float | None) -> float | None:
    return None if t is None else t * 1e3


def _shape_figure(s: dict[str, Any]) -> Any:
    from plotly.subplots import make_subplots

    fig = make_subplots(
        rows=1,
        cols=4,
        subplot_titles=(
            "best time (ms) over versions and runs",
            "speedup over the default config (95 % interval)",
            "optimization history, every search of the current version (ms)",
            "configs by status, every search of the current version",
        ),
        horizontal_spacing=0.07,
    )
    vs = s["versions"]
    for col, traces in enumerate(
        (_time_traces(s), _speedup_traces(vs), _history_traces(vs[-1]["history"]), _status_traces(vs)), 1
    ):
        for trace in traces:
            fig.add_trace(trace, row=1, col=col)
    # room above the panel titles for plotly's toolbar, below them for the axis titles
    fig.update_layout(
        height=380, margin={"l": 60, "r": 10, "t": 80, "b": 60}, showlegend=False, template="plotly_white"
    )
    for col, (x_title, y_title) in enumerate(_AXES, 1):
        fig.update_xaxes(title_text=x_title, row=1, col=col)
        fig.update_yaxes(title_text=y_title, row=1, col=col)
    # times as categories (minutes, in order): one point, or points seconds apart, stay readable
    fig.update_xaxes(type="category", categoryorder="category ascending", row=1, col=1)
    fig.update_xaxes(showticklabels=False, row=1, col=2)
    fig.update_yaxes(type="log", row=1, col=3)
    # times, speed-ups and counts are positive: their axes start at 0 (a single point got a negative axis)
    for col in (1, 2, 4):
        fig.update_yaxes(rangemode="tozero", row=1, col=col)
    return fig


def _when(iso: str | None) -> str:
    """A timestamp as the time panel's category: to the minute, UTC."""
    return (iso or "")[:16].replace("T", " ")


def _time_traces(s: dict[str, Any]) -> list[Any]:
    """The stored best of each version, and the nightly re-measurements (red: a regression)."""
    import plotly.graph_objects as go

    vs = s["versions"]
    traces = [
        go.Scatter(
            x=[_when(v["created_at"]) for v in vs],
            y=[_ms(v["best_s"]) for v in vs],
            text=[v["environment"] for v in vs],
            mode="markers+lines",
            name="stored best per version",
        )
    ]
    if s["verifications"]:
        ver = s["verifications"]
        traces.append(
            go.Scatter(
                x=[_when(v["created_at"]) for v in ver],
                y=[_ms(v["median_s"]) for v in ver],
                text=[v["status"] for v in ver],
                mode="markers+lines",
                name="nightly re-measurement (median)",
                marker={
                    "color": ["#c00" if v["status"] in ("regression", "confirmed") else "#2a2" for v in ver]
                },
            )
        )
    return traces


def _speedup_traces(vs: list[dict[str, Any]]) -> list[Any]:
    import plotly.graph_objects as go

    return [
        go.Bar(
            x=[f"{v['environment']} ({v['source']})" for v in vs],
            y=[v["speedup_default"] or 0 for v in vs],
            error_y=_error_bars(vs),
            name="speedup over default",
        )
    ]


def _error_bars(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Asymmetric error bars from each row's ``speedup_interval`` (none where a row has no interval)."""
    up, down = [], []
    for r in rows:
        value, interval = r.get("speedup_default"), r.get("speedup_interval")
        ok = value is not None and interval and interval[0] is not None and interval[1] is not None
        up.append(interval[1] - value if ok else 0.0)
        down.append(value - interval[0] if ok else 0.0)
    return {"type": "data", "symmetric": False, "array": up, "arrayminus": down, "visible": True}


def _history_traces(hist: list[dict[str, Any]]) -> list[Any]:
    """Each search evaluation of the version (every run, in order; re-timings left out), and the best so
    far."""
    import plotly.graph_objects as go

    best, best_so_far = None, []
    for h in hist:
        if h["time_s"] is not None:
            best = h["time_s"] if best is None else min(best, h["time_s"])
        best_so_far.append(_ms(best))
    return [
        go.Scatter(
            x=[h["i"] for h in hist if h["time_s"] is not None],
            y=[_ms(h["time_s"]) for h in hist if h["time_s"] is not None],
            mode="markers",
            name="trial",
        ),
        go.Scatter(x=[h["i"] for h in hist], y=best_so_far, mode="lines", name="best so far"),
    ]


def _status_traces(vs: list[dict[str, Any]]) -> list[Any]:
    import plotly.graph_objects as go

    counts = vs[-1]["counts"]
    order = [k for k in STATUS_COLOURS if k in counts] + sorted(k for k in counts if k not in STATUS_COLOURS)
    return [
        go.Bar(
            x=order,
            y=[counts[k] for k in order],
            name="status",
            marker={"color": [STATUS_COLOURS.get(k, "#17becf") for k in order]},
        )
    ]


def _summary_figure(doc: dict[str, Any]) -> Any:
    import plotly.graph_objects as go

    shapes = doc["shapes"]
    fig = go.Figure(
        go.Bar(
            x=[f"{s['kernel']} {s['shape']}" for s in shapes],
            y=[s["speedup_default"] or 0 for s in shapes],
            error_y=_error_bars(shapes),
            name="speedup over default",
        )
    )
    fig.update_layout(
        title="best config's speedup over the default config, per shape (95 % interval)",
        height=380,
        template="plotly_white",
        margin={"l": 60, "r": 10, "t": 80, "b": 120},
        xaxis_title="kernel and shape",
        yaxis_title="speedup over the default (x), 95 % interval",
        yaxis_rangemode="tozero",
    )
    return fig


def _table(headers: list[str], rows: list[list[str]], classes: list[str] | None = None) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        f"<tr class='{(classes or [''] * len(rows))[i]}'>"
        + "".join(f"<td>{html.escape(c)}</td>" for c in r)
        + "</tr>"
        for i, r in enumerate(rows)
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def plotly_js_name() -> str:
    """The shared copy of plotly.js written beside the reports: named for its version, so a report never
    loads another version than the one it was drawn for."""
    import plotly

    return f"plotly-{plotly.__version__}.min.js"


def render_html(doc: dict[str, Any], *, plotly_src: str | None = None) -> str:
    """The page; ``plotly_src``: the shared plotly.js file it loads (a relative name), else plotly.js is
    inlined (a single file to mail, 4.8 MB heavier)."""
    import plotly.io as pio
    from plotly.offline import get_plotlyjs

    parts = [
        f"<h1>autotune report</h1><p>Database <code>{html.escape(doc['database'])}</code>, generated "
        f"{html.escape(doc['generated_at'][:19])} UTC.</p>"
    ]
    if doc.get("run"):
        parts += _run_section(doc["run"])
    parts += _regressions_section(doc["regressions"])
    parts += _best_section(doc["shapes"])
    parts += _failures_section(doc["shapes"])
    # Figures go in as placeholders, replaced by their divs once the page's text is joined.
    figures: list[tuple[str, Any]] = []
    if doc["shapes"]:
        parts += _shapes_section(doc, figures)
    if doc["requests"]:
        parts += _requests_section(doc["requests"])
    if doc["runs"]:
        parts += _runs_section(doc["runs"])
    body = "\n".join(parts)
    for name, fig in figures:
        div = pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=f"plot-{name}")
        body = body.replace(f"<div class='plot' id='slot-{name}'></div>", f"<div class='plot'>{div}</div>")
    if plotly_src is not None:
        script = f"<script type='text/javascript' src='{html.escape(plotly_src)}'></script>"
    else:
        script = f"<script type='text/javascript'>{get_plotlyjs()}</script>"
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>autotune report</title>"
        f"<style>{_STYLE}</style>{script}</head><body>{body}</body></html>"
    )


def _run_section(run: dict[str, Any]) -> list[str]:
    """The run the report is about: its outcome, and what it did per shape."""
    s = run["summary"]
    parts = [
        f"<h2>Run {html.escape(run['run_id'])}</h2><p>Job <b>{html.escape(run['job'])}</b> on "
        f"{html.escape(run['host'])}: {html.escape(run['status'])}, {s.get('wall_s', 0):.1f} s; "
        f"{s.get('regressions', 0)} regression(s), {s.get('confirmed', 0)} confirmed.</p>"
    ]
    rows = [
        [
            e["kernel"],
            e["shape"],
            e["action"],
            e.get("skipped") or e["reason"],
            evaluated(e),
            fmt_time(e.get("best_s")),
            f"{e['speedup']:.2f}x" if e.get("speedup") else "-",
        ]
        for e in s.get("shapes", [])
    ]
    if rows:
        parts.append(_table(["kernel", "shape", "action", "why", "evaluated", "best", "vs default"], rows))
    skipped = [list(k) for k in skipped_requests(s)]
    if skipped:
        parts += ["<h3>Requests skipped</h3>", _table(["kernel", "request (why)"], skipped)]
    return parts


def _regressions_section(regressions: list[dict[str, Any]]) -> list[str]:
    if not regressions:
        return ["<h2>Regressions</h2>", "<p>None.</p>"]
    rows = [
        [
            r["kernel"],
            r["shape"],
            r["device"],
            r["status"],
            f"{r['ratio']:.3f}x",
            f"{r['p_value']:.2g}",
            fmt_time(r["baseline_s"]),
            fmt_time(r["median_s"]),
            r.get("clocks") or "-",
        ]
        for r in regressions
    ]
    headers = ["kernel", "shape", "device", "status", "ratio", "p", "baseline", "now", "clocks"]
    return ["<h2>Regressions</h2>", _table(headers, rows, ["regression"] * len(regressions))]


def _best_section(shapes: list[dict[str, Any]]) -> list[str]:
    """The Markdown's best-config table: the best and default times, the config, the last verification."""
    rows = []
    for s in shapes:
        v = s["last_verification"]
        ver = f"{v['status']} ({v['ratio']:.3f}x)" if v and v["ratio"] else (v["status"] if v else "-")
        rows.append(
            [
                s["kernel"],
                s["shape"],
                s["device"],
                best_text(s),
                fmt_config(s["best_config"]),
                fmt_time(s["default_s"]),
                speedup_text(s),
                ver,
                s["environment"],
            ]
        )
    headers = ["kernel", "shape", "device", "best (median [95 % interval], samples)", "config", "default"]
    headers += ["speedup vs default [95 % interval]"]
    headers += ["last verification", "environment"]
    return ["<h2>Best configs</h2>", _table(headers, rows)]


def _failures_section(shapes: list[dict[str, Any]]) -> list[str]:
    rows = [
        [s["kernel"], s["shape"], ", ".join(f"{k}={n}" for k, n in sorted(s["failures"].items()))]
        for s in shapes
        if s["failures"]
    ]
    if not rows:
        return []
    return ["<h2>Failures by status</h2>", _table(["kernel", "shape", "failures"], rows)]


def _shapes_section(doc: dict[str, Any], figures: list[tuple[str, Any]]) -> list[str]:
    """The speedup summary, then per shape its line and its figure (appended to ``figures``)."""
    parts = ["<h2>Speedups</h2>"]
    figures.append(("summary", _summary_figure(doc)))
    parts.append("<div class='plot' id='slot-summary'></div>")
    parts.append("<h2>Shapes</h2>")
    for i, s in enumerate(doc["shapes"]):
        v = s["last_verification"]
        ver = "-"
        if v:
            ver = v["status"] + (f" ({v['ratio']:.3f}x)" if v["ratio"] else "")
            ver += f", {v['clocks']}" if v.get("clocks") else ""
        parts.append(
            f"<h3>{html.escape(s['kernel'])} {html.escape(s['shape'])} on {html.escape(s['device'])}</h3>"
            f"<p>best {fmt_time(s['best_s'])} ({html.escape(json.dumps(s['best_config']))}); default "
            f"{fmt_time(s['default_s'])}; last verification: "
            f"{html.escape(ver)}"
            f"; {html.escape(s['environment'])}</p>"
        )
        figures.append((f"shape{i}", _shape_figure(s)))
        parts.append(f"<div class='plot' id='slot-shape{i}'></div>")
    return parts


def _requests_section(requests: list[dict[str, Any]]) -> list[str]:
    rows = [[r["kernel"], r["shape"], r["device"], str(r["count"])] for r in requests]
    return ["<h2>Shapes requested at run time</h2>", _table(["kernel", "shape", "device", "lookups"], rows)]


def _runs_section(runs: list[dict[str, Any]]) -> list[str]:
    rows = [
        [
            r["run_id"],
            r["job"],
            r["host"],
            r["status"],
            str(r["shapes"]),
            str(r["verified"]),
            str(r["regressions"]),
            str(r["confirmed"]),
        ]
        for r in runs[-20:]
    ]
    headers = ["run", "job", "host", "status", "shapes", "verified", "regressions", "confirmed"]
    return ["<h2>Runs</h2>", _table(headers, rows)]
