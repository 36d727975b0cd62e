"""The report as Markdown (a PR comment, a chat message): the same content as the HTML, as tables."""

from __future__ import annotations

from typing import Any


def fmt_time(t: float | None) -> str:
    if t is None:
        return "-"
    if t >= 1e-3:
        return f"{t * 1e3:.3f} ms"
    return f"{t * 1e6:.2f} us"


def _x(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}x"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(doc: dict[str, Any]) -> str:
    lines = ["# autotune report", ""]
    lines.append(f"Database `{doc['database']}`, generated {doc['generated_at'][:19]} UTC.")
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
        f"## Run `{run['run_id']}`",
        "",
        f"Job **{run['job']}** on `{run['host']}`: {run['status']}, {s.get('wall_s', 0):.1f} s; "
        f"{len(s.get('shapes', []))} shape(s) planned, {len(s.get('verifications', []))} verified, "
        f"{s.get('regressions', 0)} regression(s), {s.get('confirmed', 0)} confirmed"
        + (f"; stopped: {s['stopped']}" if s.get("stopped") else "")
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
                f"| {e['kernel']} | {e['shape']} | {e['action']} | {_cell(e.get('skipped') or e['reason'])} | "
                f"{e.get('evaluations', 0)} | {fmt_time(e.get('best_s'))} | {_x(e.get('speedup'))} |"
            )
    for err in s.get("errors", []):
        lines.append(f"- error: {_cell(err)}")
    return lines


def _regressions_section(regressions: list[dict[str, Any]]) -> list[str]:
    lines = ["", "## Regressions", ""]
    if not regressions:
        return [*lines, "None."]
    lines += [
        "| kernel | shape | device | status | ratio | p | baseline | now |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in regressions:
        lines.append(
            f"| {r['kernel']} | {r['shape']} | {r['device']} | **{r['status']}** | {_x(r['ratio'], 3)} | "
            f"{r['p_value']:.2g} | {fmt_time(r['baseline_s'])} | {fmt_time(r['median_s'])} |"
        )
    return lines


def _best_section(shapes: list[dict[str, Any]]) -> list[str]:
    lines = [
        "",
        "## Best configs",
        "",
        "| kernel | shape | device | best | default | speedup vs default | last verification | environment |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in shapes:
        v = s["last_verification"]
        ver = f"{v['status']} ({_x(v['ratio'], 3)})" if v else "-"
        lines.append(
            f"| {s['kernel']} | {s['shape']} | {_cell(s['device'])} | {fmt_time(s['best_s'])} | "
            f"{fmt_time(s['default_s'])} | {_x(s['speedup_default'])} | {ver} | {_cell(s['environment'])} |"
        )
    return lines


def _failures_section(shapes: list[dict[str, Any]]) -> list[str]:
    failures = [(s, s["failures"]) for s in shapes if s["failures"]]
    if not failures:
        return []
    lines = ["", "## Failures by status", "", "| kernel | shape | failures |", "|---|---|---|"]
    for s, f in failures:
        lines.append(
            f"| {s['kernel']} | {s['shape']} | {', '.join(f'{k}={n}' for k, n in sorted(f.items()))} |"
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
        lines.append(f"| {r['kernel']} | {r['shape']} | {_cell(r['device'])} | {r['count']} |")
    return lines


def _runs_section(runs: list[dict[str, Any]]) -> list[str]:
    lines = ["", "## Runs", "", "| run | job | host | status | shapes | verified | regressions | confirmed |"]
    lines.append("|---|---|---|---|---|---|---|---|")
    for r in runs[-20:]:
        lines.append(
            f"| {r['run_id']} | {r['job']} | {r['host']} | {r['status']} | {r['shapes']} | {r['verified']} | "
            f"{r['regressions']} | {r['confirmed']} |"
        )
    return lines
