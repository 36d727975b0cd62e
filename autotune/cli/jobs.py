"""The scheduled jobs: ``autotune nightly`` (tune, re-tune, verify) and ``autotune report``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from autotune.cli.common import DbOption, err, out, say_error
from autotune.files import check_writable, write_text

app = typer.Typer()


@app.command()
def nightly(
    job_file: Annotated[
        Path, typer.Argument(help="Job file (YAML): kernels, shapes, budget, verify, report")
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would be tuned, re-tuned and verified, and why")
    ] = False,
    fail_on_regression: Annotated[
        bool, typer.Option("--fail-on-regression", help="Exit 1 when a confirmed regression exists")
    ] = False,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the run's summary as JSON")
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No per-trial lines (the plan and per-shape lines stay)")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Per-trial lines with whole errors")
    ] = False,
) -> None:
    """Run a nightly job: tune new and requested shapes, re-tune after upgrades, re-verify stored bests."""
    from autotune.jobs.nightly import load_job, run_job
    from autotune.tuning.progress import SearchProgress, choose_mode

    job = load_job(job_file)
    if json_out is not None:
        check_writable(json_out, "--json")  # before the run, not after it
    # A job's output is a log: plain per-trial lines as a piped search prints, on a terminal too.
    progress = SearchProgress(err, choose_mode(err, quiet=quiet, bar=False), verbose=verbose)
    result = run_job(
        job,
        dry_run=dry_run,
        say=lambda line: err.print(line, highlight=False, markup=False),
        on_event=progress.on_event,
    )
    if job.report is not None and not dry_run:
        from autotune.jobs.report import write_report, written

        files = write_report(job.database, job.report, run_id=result.run_id)
        err.print(f"report: {written(files)}", highlight=False)
    if json_out is not None:
        write_text(json_out, json.dumps(result.summary(), indent=2, default=str), "--json")
    n_reg, n_conf = len(result.regressions), len(result.confirmed)
    err.print(
        f"nightly {job.name}: {'planned' if dry_run else 'done'} in {result.wall_s:.1f} s; "
        f"{len(result.verifications)} verified, {n_reg} regression(s), {n_conf} confirmed"
        + (f"; stopped: {result.stopped}" if result.stopped else ""),
        highlight=False,
    )
    for e in result.errors:
        say_error(e)
    if result.idle_reason and not result.errors:
        say_error(result.idle_reason)
    code = result.exit_code(fail_on_regression)
    if code:
        raise typer.Exit(code)


@app.command()
def report(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for report.html, report.md, report.json")],
    db: DbOption = None,
    since: Annotated[
        str | None, typer.Option(help="Only history since this ISO date (or e.g. 7d, 24h)")
    ] = None,
) -> None:
    """Write the tuning report: HTML with plots, the same as Markdown and JSON."""
    from autotune.jobs.report import parse_since, write_report, written

    files = write_report(db, out_dir, since=parse_since(since) if since else None)
    out.print(f"wrote {written(files)}", highlight=False)
