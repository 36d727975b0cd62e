"""The report as Markdown (a PR comment, a chat message): the same content as the HTML, as tables."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autotune.stats import Ratio
from autotune.trial import fmt_config, fmt_time, fmt_time_interval


def _x(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}x"


def best_text(s: Mapping[str, Any]) -> str:
    """A best's median with its 95 % interval and sample count: a best on 1 sample never looks as solid
    as one on 30."""
    interval = s.get("best_interval_s") or (None, None)
    text = fmt_time_interval(s.get("best_s"), *interval)
    n = s.get("best_samples")
    return (
        text if s.get("best_s") is None else f"{text}, n={n or 1}" + (" (one sample)" if (n or 1) < 2 else "")
    )


def speedup_text(s: Mapping[str, Any]) -> str:
    """The speed-up over the default with its interval; one across 1 is said to be no clear difference."""
    value = s.get("speedup_default")
    if value is None:
        return "-"
    low, high = s.get("speedup_interval") or (None, None)
    pairs = s.get("speedup_pairs") or 0
    return Ratio(value, low, high, pairs).text() if pairs else f"{value:.2f}x (unpaired)"


#: what a value from the database may not carry into the Markdown as markup. Raw HTML (``<img onerror=..>``,
#: ``<script>``: kernel and shape names, hosts, errors are anyone's text) becomes entities, which render as
#: the text itself; a link or image (``[..](..)``, ``![..](..)``), a code span, emphasis and a table's
#: ``|`` are backslash-escaped; line breaks would end a table row.
_ESCAPES = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        "\\": "\\\\",
        "`": "\\`",
        "*": "\\*",
        "[": "\\[",
        "]": "\\]",
        "|": "\\|",
        "\n": " ",
        "\r": " ",
    }
)


def _cell(text: Any) -> str:
    """A value from the database as Markdown text (in a table cell, a heading or a sentence)."""
    return str(text).translate(_ESCAPES)


def render_markdown(doc: dict[str, Any]) -> str:
    lines = ["# autotune report", ""]
    lines.append(f"Database {_cell(doc['database'])}, generated {_cell(doc['generated_at'][:19])} UTC.")
    if doc.get("run"):
        lines += _run_section(doc["run"])
    lines += _regressions_section(doc["regressions"])
    lines += _best_section(doc["shapes"])
    lines += _failures_section(doc["shapes"])
    if doc["requests"]:
        lines += _requests_section(doc["requests"])
    if doc["runs"]:
        lines += _runs_section(doc["runs"])
    return "\n".join(lines) + "\n"


def _run_section(run: dict[str, Any]) -> list[str]:
    """The run the report is about: its outcome, what it did per shape, its errors."""
    s = run["summary"]
    lines = [
        "",
        f"## Run {_cell(run['run_id'])}",
        "",
        f"Job **{_cell(run['job'])}** on {_cell(run['host'])}: {_cell(run['status'])}, {s.get('wall_s', 0):.1f} s; "
        f"{len(s.get('shapes', []))} shape(s) planned, {len(s.get('verifications', []))} verified, "
        f"{_cell(s.get('regressions', 0))} regression(s), {_cell(s.get('confirmed', 0))} confirmed"
        + (f"; stopped: {_cell(s['stopped'])}" if s.get("stopped") else "")
        + ".",
    ]
    if s.get("shapes"):
        lines += [
            "",
            "| kernel | shape | action | why | evaluated | best | speedup vs default |",
            "|---|---|---|---|---|---|---|",
        ]
        for e in s["shapes"]:
            lines.append(
                f"| {_cell(e['kernel'])} | {_cell(e['shape'])} | {_cell(e['action'])} | "
                f"{_cell(e.get('skipped') or e['reason'])} | "
                f"{_cell(evaluated(e))} | {fmt_time(e.get('best_s'))} | {_x(e.get('speedup'))} |"
            )
    for kernel, skipped in skipped_requests(s):
        lines.append(f"- skipped request of {_cell(kernel)}: {_cell(skipped)}")
    for err in s.get("errors", []):
        lines.append(f"- error: {_cell(err)}")
    return lines


def evaluated(e: dict[str, Any]) -> str:
    """A searched shape's evaluations and why its search stopped (``search.stopping``'s reasons)."""
    n = str(e.get("evaluations", 0))
    return f"{n} ({e['stop_reason']})" if e.get("stop_reason") else n


def skipped_requests(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """(kernel, request and why) of every request the run did not tune: production's data that is no shape
    of the kernel, or whose inputs could not be built."""
    return [
        (str(plan.get("kernel", "")), str(skipped))
        for plan in summary.get("plans", [])
        for skipped in plan.get("skipped_requests", [])
    ]


def _regressions_section(regressions: list[dict[str, Any]]) -> list[str]:
    lines = ["", "## Regressions", ""]
    if not regressions:
        return [*lines, "None."]
    lines += [
        "| kernel | shape | device | status | ratio | p | baseline | now | clocks |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in regressions:
        lines.append(
            f"| {_cell(r['kernel'])} | {_cell(r['shape'])} | {_cell(r['device'])} | **{_cell(r['status'])}** | "
            f"{_x(r['ratio'], 3)} | "
            f"{r['p_value']:.2g} | {fmt_time(r['baseline_s'])} | {fmt_time(r['median_s'])} | "
            f"{_cell(r.get('clocks') or '-')} |"
        )
    return lines


def _best_section(shapes: list[dict[str, Any]]) -> list[str]:
    lines = [
        "",
        "## Best configs",
        "",
        "| kernel | shape | device | best (median [95 % interval], samples) | config | default | speedup vs default [95 % interval] | last verification | environment |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in shapes:
        v = s["last_verification"]
        ver = f"{_cell(v['status'])} ({_x(v['ratio'], 3)})" if v else "-"
        if v and v.get("clocks"):
            ver += f", {_cell(v['clocks'])}"
        lines.append(
            f"| {_cell(s['kernel'])} | {_cell(s['shape'])} | {_cell(s['device'])} | {_cell(best_text(s))} | "
            f"{_cell(fmt_config(s['best_config']))} | {fmt_time(s['default_s'])} | {_cell(speedup_text(s))} | {ver} | {_cell(s['environment'])} |"
        )
    return lines


def _failures_section(shapes: list[dict[str, Any]]) -> list[str]:
    failures = [(s, s["failures"]) for s in shapes if s["failures"]]
    if not failures:
        return []
    lines = ["", "## Failures by status", "", "| kernel | shape | failures |", "|---|---|---|"]
    for s, f in failures:
        lines.append(
            f"| {_cell(s['kernel'])} | {_cell(s['shape'])} | "
            f"{_cell(', '.join(f'{k}={n}' for k, n in sorted(f.items())))} |"
        )
    return lines


def _requests_section(requests: list[dict[str, Any]]) -> list[str]:
    lines = [
        "",
        "## Shapes requested at run time",
        "",
        "| kernel | shape | device | lookups |",
        "|---|---|---|---|",
    ]
    for r in requests:
        lines.append(
            f"| {_cell(r['kernel'])} | {_cell(r['shape'])} | {_cell(r['device'])} | {_cell(r['count'])} |"
        )
    return lines


def _runs_section(runs: list[dict[str, Any]]) -> list[str]:
    lines = ["", "## Runs", "", "| run | job | host | status | shapes | verified | regressions | confirmed |"]
    lines.append("|---|---|---|---|---|---|---|---|")
    for r in runs[-20:]:
        lines.append(
            f"| {_cell(r['run_id'])} | {_cell(r['job'])} | {_cell(r['host'])} | {_cell(r['status'])} | "
            f"{_cell(r['shapes'])} | {_cell(r['verified'])} | {_cell(r['regressions'])} | {_cell(r['confirmed'])} |"
        )
    return lines
