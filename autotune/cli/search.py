"""``autotune search``: check the inputs, open the database once, start the workers (creating a new
database meanwhile), search each shape showing progress (``tuning.progress``), print and write the per-shape results."""

from __future__ import annotations

import json
import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from autotune.cli.common import (
    DbOption,
    DevicesOption,
    ShapesOption,
    check_strategy,
    err,
    fmt_config,
    opt_help,
    out,
)
from autotune.errors import DatabaseUnreachableError, SettingsError
from autotune.files import check_writable, write_text
from autotune.plain_table import PlainTable as Table
from autotune.trial import fmt_time, fmt_time_interval

if TYPE_CHECKING:
    from autotune.engine import WorkerInfo
    from autotune.settings import SearchSettings
    from autotune.shapes import Shape
    from autotune.store import Store
    from autotune.tuning.finalists import Finalist
    from autotune.tuning.progress import SearchProgress
    from autotune.tuning.report import ShapeReport
    from autotune.tuning.tuner import Tuner

app = typer.Typer()

FileArgument = Annotated[Path, typer.Argument(help="Kernel file declaring KERNEL (see README)")]
TrialsOption = Annotated[
    int | None,
    typer.Option(
        "--trials",
        help=opt_help(
            "New evaluations per shape, exactly",
            env="AUTOTUNE_TRIALS",
            default="none: the stopping rule decides",
        ),
    ),
]
TimeoutOption = Annotated[
    float | None,
    typer.Option(help=opt_help("Wall-clock seconds per shape (0 = none)", env="AUTOTUNE_TIMEOUT", default=0)),
]
StrategyOption = Annotated[
    str | None,
    typer.Option(
        "--strategy",
        "--sampler",
        help=opt_help("auto, tpe, random, exhaustive (= grid)", env="AUTOTUNE_STRATEGY", default="auto"),
    ),
]
SeedOption = Annotated[
    int | None, typer.Option(help=opt_help("Strategy seed", env="AUTOTUNE_SEED", default="none: random"))
]
RetimeTopOption = Annotated[
    int | None,
    typer.Option(
        help=opt_help(
            "Finalists re-timed before a best is declared (0 = none)", env="AUTOTUNE_RETIME_TOP", default=3
        )
    ),
]
RetimeRoundsOption = Annotated[
    int | None,
    typer.Option(help=opt_help("Interleaved re-timing rounds", env="AUTOTUNE_RETIME_ROUNDS", default=3)),
]
LocalOption = Annotated[
    bool,
    typer.Option("--local", help="Search in this process, even when a live `autotune serve` here runs FILE"),
]
NumTestsOption = Annotated[
    int | None,
    typer.Option(help=opt_help("Timed calls per measurement", env="AUTOTUNE_NUM_TESTS", default=30)),
]
CompileTimeoutOption = Annotated[
    float | None,
    typer.Option(
        help=opt_help("Seconds a config may take to compile", env="AUTOTUNE_COMPILE_TIMEOUT", default=180)
    ),
]
RunTimeoutOption = Annotated[
    float | None,
    typer.Option(
        help=opt_help("Seconds a config may take to check and time", env="AUTOTUNE_RUN_TIMEOUT", default=120)
    ),
]
CompileWorkersOption = Annotated[
    int | None,
    typer.Option(
        help=opt_help(
            "Processes compiling ahead of the timing workers",
            env="AUTOTUNE_COMPILE_WORKERS",
            default="cores - 1 with GPUs, 0 on a CPU",
        )
    ),
]
ConfigsOption = Annotated[
    Path | None,
    typer.Option(
        "--configs", help="JSON list of configs: evaluate exactly these (e.g. a triton.Config list)"
    ),
]
RetryFailedOption = Annotated[
    bool,
    typer.Option(
        "--retry-failed",
        help="Measure again the configs stored as timeout or crashed under this key (e.g. after a busy moment)",
    ),
]
JsonOption = Annotated[Path | None, typer.Option("--json", help="Also write the per-shape results as JSON")]
QuietOption = Annotated[
    bool, typer.Option("--quiet", "-q", help="No progress on stderr (no bar, no per-trial lines)")
]
VerboseOption = Annotated[
    bool,
    typer.Option(
        "--verbose", "-v", help="Per-trial lines with whole errors (also above the bar on a terminal)"
    ),
]


@app.command()
def search(
    file: FileArgument,
    shape: ShapesOption = None,
    trials: TrialsOption = None,
    timeout: TimeoutOption = None,
    strategy: StrategyOption = None,
    seed: SeedOption = None,
    retime_top: RetimeTopOption = None,
    retime_rounds: RetimeRoundsOption = None,
    db: DbOption = None,
    devices: DevicesOption = None,
    num_tests: NumTestsOption = None,
    compile_timeout: CompileTimeoutOption = None,
    run_timeout: RunTimeoutOption = None,
    compile_workers: CompileWorkersOption = None,
    configs: ConfigsOption = None,
    retry_failed: RetryFailedOption = False,
    json_out: JsonOption = None,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
    local: LocalOption = False,
) -> None:
    """Search the fastest correct config of FILE's kernel for each shape; store every trial.

    Processes on many hosts may run it against one database (claims: no config is measured twice); a live
    `autotune serve` here running FILE searches with its warm workers (`--local`: in this process)."""
    from autotune import timeline

    with timeline.traced():
        from autotune.settings import SearchSettings
        from autotune.shapes import parse_shapes

        settings = SearchSettings.from_options(
            trials=trials,
            timeout_s=timeout,
            strategy=strategy,
            seed=seed,
            retime_top=retime_top,
            retime_rounds=retime_rounds,
            devices=devices,
            num_tests=num_tests,
            compile_timeout_s=compile_timeout,
            run_timeout_s=run_timeout,
            compile_workers=compile_workers,
            configs_file=str(configs) if configs else None,
            retry_failed=retry_failed or None,
        )
        check_strategy(settings.strategy)
        shapes = parse_shapes(shape)
        _check_paths(file, configs, json_out)
        with timeline.phase("check the database (read-only)"):
            store, new_db = _open_db(db)
        from autotune.tuning.progress import SearchProgress, choose_mode

        progress = SearchProgress(err, choose_mode(err, quiet=quiet, verbose=verbose), verbose=verbose)
        handed = _via_service(file, store, settings, shapes, progress, local=local or new_db)
        reports, kernel = handed or _run(file, store, new_db, settings, shapes, progress)
        with timeline.phase("print the results"):
            print_reports(reports, kernel)
            _write_json(json_out, reports)


def _write_json(json_out: Path | None, reports: list[ShapeReport]) -> None:
    """``--json``: every shape's report (``report_dict``)."""
    if json_out is not None:
        from autotune.tuning.report import report_dict

        write_text(json_out, json.dumps([report_dict(r) for r in reports], indent=2, default=str), "--json")


def _via_service(
    file: Path,
    store: Store,
    settings: SearchSettings,
    shapes: list[dict[str, int]],
    progress: SearchProgress,
    *,
    local: bool,
) -> tuple[list[ShapeReport], str] | None:
    """The reports of a live service of this host running FILE, or None: search in this process (``local``:
    --local, or a new database no service uses; no --shape: the kernel's default shapes are in its file)."""
    from dataclasses import replace

    from autotune import timeline
    from autotune.kernel.contract import source_hash
    from autotune.service.client import HANDED_OVER, find_service, hand_over
    from autotune.settings import SearchSettings

    if local:
        return None
    # how configs are compiled and timed is the service's: a search setting them otherwise runs here
    why = "" if shapes else "no --shape (the default shapes are in the file, which a service never reads)"
    if replace(settings, **{k: getattr(SearchSettings(), k) for k in HANDED_OVER}) != SearchSettings():
        why = why or "an option that changes how configs are compiled or timed (those are the service's)"
    with timeline.phase("look for a live autotune serve running FILE"):
        found = find_service(store, source_hash(file), settings.devices)
    if found is None:
        return None
    service, kernel = found
    if why:  # a live service runs this very file: say why the search is not handed to it
        progress.say(f"searching in this process, not through autotune serve (pid {service.pid}): {why}")
        return None
    with progress:
        reports = hand_over(store, service, kernel, shapes, settings, progress)
    return None if reports is None else (reports, str(kernel["name"]))


def _check_paths(file: Path, configs: Path | None, json_out: Path | None) -> None:
    """The command's files, before any work: one line each for a missing input or an unwritable output."""
    if configs is not None and not configs.is_file():
        raise SettingsError(f"--configs {configs}: no such file")
    if not file.is_file():
        raise SettingsError(f"{file}: no such kernel file")
    if json_out is not None:
        check_writable(json_out, "--json")  # before the search, not after it


def _open_db(db: str | None) -> tuple[Store, bool]:
    """(the store the search writes to, whether its database has no schema yet). The database is checked
    through a read-only connection before the workers start, so an unreachable, outdated or newer one fails
    fast and nothing is written until every input has been checked (a connection that may write would
    already checkpoint a SQLite WAL). The writer connects once the kernel file loaded."""
    from autotune.store import Store

    with Store.open(db, create=True, readonly=True) as checked:
        new_db = checked.schema.missing()
    return Store(db), new_db


def _run(
    file: Path,
    store: Store,
    new_db: bool,
    settings: SearchSettings,
    shapes: list[Shape] | None,
    progress: SearchProgress,
) -> tuple[list[ShapeReport], str]:
    """Search every shape with one set of workers; (the per-shape reports, the kernel's name)."""
    from autotune.tuning.tuner import Tuner

    with Tuner(str(file), store, settings, on_event=progress.on_event, wait_for_study=False) as tuner:
        info, resolved = _start(tuner, store, new_db, shapes)
        devs = ", ".join(i.device for i in tuner.infos)
        progress.say(
            f"kernel {info.meta.name} on {info.env['gpu_name']} ({devs}); {len(resolved)} shape(s); "
            f"strategy {settings.strategy}; {tuner.pipeline.compile_workers} compile worker(s); "
            f"db {store.masked_url}"
        )
        with progress:
            reports = [_search_shape(tuner, s, progress) for s in resolved]
    return reports, info.meta.name


def _start(
    tuner: Tuner, store: Store, new_db: bool, shapes: list[Shape] | None
) -> tuple[WorkerInfo, list[Shape]]:
    """Start the workers and resolve the shapes. A new database is created meanwhile (both take seconds);
    if the kernel file turns out bad, a new SQLite file is removed again: bad input leaves nothing behind."""

    with ThreadPoolExecutor(1) as ex:
        created = ex.submit(store.schema.create) if new_db else None
        try:
            info = tuner.start()
            resolved = tuner.resolve_shapes(shapes)
        except BaseException:
            if created is not None:
                _discard_new_sqlite(created, store)
            raise
        if created is not None:
            created.result()
            err.print(f"initialized a new autotune database at {store.masked_url}", highlight=False)
    return info, resolved


def _discard_new_sqlite(created: Future[None], store: Store) -> None:
    try:
        created.result()
    except Exception:
        pass
    store.close()
    if store.db.sqlite_path:
        for suffix in ("", "-wal", "-shm", ".lock"):
            try:
                os.remove(store.db.sqlite_path + suffix)
            except OSError:
                pass


def _search_shape(tuner: Tuner, shape: Shape, progress: SearchProgress) -> ShapeReport:
    progress.start_shape(shape, tuner.settings.trials)
    try:
        report = tuner.search_shape(shape)
    except DatabaseUnreachableError as e:
        raise DatabaseUnreachableError(
            f"{e}; every finished trial is stored: rerun the same command to resume"
        ) from None
    progress.finish_shape(report)
    return report


#: what each stop reason means, for the output (``search.stopping``'s reasons)
_STOP_NOTES = {
    "converged": "converged, the best's neighbours measured",
    "stalled": "no improvement beyond the noise in 4 x AUTOTUNE_STOP_PATIENCE evaluations, the best's neighbours measured",
    "ceiling": "the stopping rule's most evaluations (AUTOTUNE_STOP_MAX)",
    "wall": "the stopping rule's wall-time ceiling (AUTOTUNE_STOP_WALL)",
    "trials": "--trials spent",
    "timeout": "--timeout",
    "exhausted": "nothing left to evaluate",
}


def stop_note(r: ShapeReport) -> str:
    """One line saying why a shape's search stopped after how many evaluations."""
    note = f"stopped after {r.evaluations} evaluations: {_STOP_NOTES.get(r.stop_reason, r.stop_reason)}"
    if r.stop_noise is not None:
        bound = f"{r.stop_bound * 100:.2f} %" if r.stop_bound is not None else "not computed"
        note += f" (bound on the improvement left {bound}, noise {r.stop_noise * 100:.2f} %)"
    return note


def print_reports(reports: list[ShapeReport], kernel: str) -> None:
    from rich.text import Text

    table = Table(title=f"{kernel}: best config per shape (time: median [95 % interval], samples)")
    for col in ("shape", "best config", "time", "TFLOP/s", "vs default", "evals", "failures (this run)"):
        # a config is never cut: it folds onto further lines
        table.add_column(col, overflow="fold")
    for r in reports:
        fails = {k: v for k, v in r.faults.items() if k != "ok"}  # by type: "crashed (illegal address)"
        table.add_row(
            r.shape_key,
            fmt_config(r.best.config) if r.best else Text.from_markup("[red]none ok[/]"),
            Text.from_markup(_fmt_best_time(r)),  # our markup; the names and configs stay plain text
            f"{r.best.tflops:.3g}" if r.best and r.best.tflops else "-",
            _fmt_speedup(r),
            f"{r.evaluations} (+{r.reused} reused" + (f", {r.busy} by others)" if r.busy else ")"),
            ", ".join(f"{k}={v}" for k, v in sorted(fails.items())) or "none",
        )
    out.print(table)
    for r in reports:
        _print_notes(r)


def _fmt_best_time(r: ShapeReport) -> str:
    """The best's time: the median of its measurements, with their spread when it makes the figure
    unreliable (above ``AUTOTUNE_UNRELIABLE_SPREAD``)."""
    if r.best is None:
        return "-"
    text = fmt_time_interval(r.best.time_s, *(r.best_interval or (None, None)))
    text += f", n={r.best_samples}" if r.best_samples > 1 else ", 1 sample"
    if r.unreliable:
        text += f" [yellow]unreliable[/] (spread ±{(r.best_spread or 0) * 100:.0f}%)"
    return text


def _fmt_speedup(r: ShapeReport) -> str:
    """default / best: paired rounds give an interval (one across 1 is no speed-up); a ratio of two single
    samples says it is one."""
    ratio = r.speedup_ratio
    if ratio is None:
        return "-"
    text = ratio.text() if ratio.pairs else f"{ratio.value:.2f}x (unpaired single samples)"
    return text + (" (unreliable)" if r.unreliable else "")


def _fmt_finalist(f: Finalist) -> str:
    if f.samples < 2:
        return f"{fmt_time(f.median_s)} (one sample)"
    return (
        f"{fmt_time(f.median_s)} ±{(f.spread or 0) * 100:.1f}% (first {fmt_time(f.first_s)}, n={f.samples})"
    )


def _print_notes(r: ShapeReport) -> None:
    """Why the search stopped, what the strategy read from other keys, and the re-timed finalists, of one
    shape."""
    out.print(f"{r.shape_key}: {stop_note(r)}", highlight=False)
    if r.history_points:
        # the report says what the strategy needs: printing it imports no strategy (Optuna: a second)
        few = r.history_points < r.history_needed
        out.print(
            f"{r.shape_key}: {r.strategy} read {r.history_points} measurements of this kernel under "
            f"{r.history_keys} other key(s) in the database"
            + (f" (too few for a prior: it needs {r.history_needed})" if few else ""),
            highlight=False,
        )
    if r.finalists:
        rows = "; ".join(_fmt_finalist(f) for f in r.finalists)
        noise = " - the top two are within noise of each other" if r.within_noise else ""
        out.print(f"{r.shape_key}: re-timed finalists (median, spread): {rows}{noise}")
