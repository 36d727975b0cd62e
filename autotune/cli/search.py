"""``autotune search``: check the inputs, open the database once, start the workers (creating a new
database meanwhile), search each shape with a progress bar, print and write the per-shape results."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from autotune.cli.common import DbOption, ShapesOption, check_strategy, err, fmt_config, out
from autotune.errors import DatabaseUnreachableError, SettingsError
from autotune.trial import fmt_time

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from autotune.engine import WorkerInfo
    from autotune.settings import SearchSettings
    from autotune.shapes import Shape
    from autotune.store import Store
    from autotune.tuning.tuner import ShapeReport, TrialEvent, Tuner

app = typer.Typer()

FileArgument = Annotated[Path, typer.Argument(help="Kernel file declaring KERNEL (see README)")]
TrialsOption = Annotated[
    int | None,
    typer.Option(
        help="New evaluations per shape, exactly [env: AUTOTUNE_TRIALS; default: the stopping rule decides]"
    ),
]
TimeoutOption = Annotated[float | None, typer.Option(help="Wall-clock seconds per shape (0 = none)")]
StrategyOption = Annotated[
    str | None,
    typer.Option(
        "--strategy",
        "--sampler",
        help="auto (default), tpe, random, exhaustive (= grid) [env: AUTOTUNE_STRATEGY]",
    ),
]
SeedOption = Annotated[int | None, typer.Option(help="Strategy seed")]
RetimeTopOption = Annotated[
    int | None,
    typer.Option(
        help="Finalists re-timed before a best is declared (default 3; 0 = none) [env: AUTOTUNE_RETIME_TOP]"
    ),
]
RetimeRoundsOption = Annotated[
    int | None,
    typer.Option(help="Interleaved re-timing rounds (default 3) [env: AUTOTUNE_RETIME_ROUNDS]"),
]
DevicesOption = Annotated[
    str | None,
    typer.Option(
        "--devices",
        "--device",
        help="cuda, cuda:N, cuda:0,cuda:1, all or cpu (default: cuda if present) [env: AUTOTUNE_DEVICES]",
    ),
]
NumTestsOption = Annotated[int | None, typer.Option(help="Timed calls per measurement")]
CompileTimeoutOption = Annotated[float | None, typer.Option(help="Seconds a config may take to compile")]
RunTimeoutOption = Annotated[float | None, typer.Option(help="Seconds a config may take to check and time")]
CompileWorkersOption = Annotated[
    int | None,
    typer.Option(help="Processes compiling ahead of the timing workers (default: cores - 1 with GPUs)"),
]
ConfigsOption = Annotated[
    Path | None,
    typer.Option(
        "--configs", help="JSON list of configs: evaluate exactly these (e.g. a triton.Config list)"
    ),
]
JsonOption = Annotated[Path | None, typer.Option("--json", help="Also write the per-shape results as JSON")]


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
    json_out: JsonOption = None,
) -> None:
    """Search the fastest correct config of FILE's kernel for each shape; store every trial.

    Several processes (one per host, or per GPU) may run the same command against one database: claims
    in the database keep them from measuring a config twice."""
    from autotune.settings import SearchSettings
    from autotune.tuning.tuner import parse_shapes

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
    )
    check_strategy(settings.strategy)
    shapes = parse_shapes(shape)
    if configs is not None and not configs.is_file():
        raise SettingsError(f"--configs {configs}: no such file")
    if not file.is_file():
        raise SettingsError(f"{file}: no such kernel file")
    store, new_db = _open_db(db)
    reports, kernel = _run(file, store, new_db, settings, shapes)
    print_reports(reports, kernel)
    if json_out is not None:
        json_out.write_text(json.dumps([report_dict(r) for r in reports], indent=2, default=str))


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
    file: Path, store: Store, new_db: bool, settings: SearchSettings, shapes: list[Shape] | None
) -> tuple[list[ShapeReport], str]:
    """Search every shape with one set of workers; (the per-shape reports, the kernel's name)."""
    from autotune.tuning.tuner import Tuner

    progress, on_event, add_bar = _progress(settings.trials)
    with Tuner(str(file), store, settings, on_event=on_event) as tuner:
        info, resolved = _start(tuner, store, new_db, shapes)
        devs = ", ".join(i.device for i in tuner.infos)
        err.print(
            f"kernel {info.meta.name} on {info.env['gpu_name']} ({devs}); {len(resolved)} shape(s); "
            f"strategy {settings.strategy}; {tuner.pipeline.compile_workers} compile worker(s); "
            f"db {store.masked_url}",
            highlight=False,
        )
        with progress:
            reports = [_search_shape(tuner, s, progress, add_bar(s)) for s in resolved]
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


def _progress(trials: int | None) -> tuple[Progress, Callable[[TrialEvent], None], Callable[[Shape], TaskID]]:
    """A progress bar per shape on stderr: (the bars, the tuner's event hook that moves them, the function
    that adds a shape's bar as its search starts)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from autotune.shapes import format_shape

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[best]}"),
        console=err,
        transient=False,
    )
    tasks: dict[str, TaskID] = {}

    def on_event(ev: TrialEvent) -> None:
        best = f"best {fmt_time(ev.best.time_s)}" if ev.best else ""
        total = ev.budget if trials is not None else None  # the stopping rule: no count is known ahead
        progress.update(tasks[format_shape(ev.shape)], completed=ev.evaluations, total=total, best=best)

    def add_bar(shape: Shape) -> TaskID:
        key = format_shape(shape)
        tasks[key] = progress.add_task(key, total=trials, best="")
        return tasks[key]

    return progress, on_event, add_bar


def _search_shape(tuner: Tuner, shape: Shape, progress: Progress, task: TaskID) -> ShapeReport:
    try:
        report = tuner.search_shape(shape)
    except DatabaseUnreachableError as e:
        raise DatabaseUnreachableError(
            f"{e}; every finished trial is stored: rerun the same command to resume"
        ) from None
    progress.update(task, completed=report.evaluations, total=max(report.evaluations, 1))
    return report


#: the names ``search --json`` has always used for these ShapeReport fields
_REPORT_NAMES = {"study_name": "study"}
#: ShapeReport fields written under "history", by these names
_REPORT_HISTORY = {"history_points": "measurements", "history_keys": "keys"}


def report_dict(r: ShapeReport) -> dict[str, Any]:
    """One shape's results as ``search --json`` writes them: every ``ShapeReport`` field (a new one needs no
    edit here), trial results by their own ``to_dict``, plus the derived speed-up and noise verdict."""
    d: dict[str, Any] = {}
    history: dict[str, Any] = {}
    for f in fields(r):
        if f.name == "shape_key":
            continue  # the shape, formatted: "shape" says it
        value = _jsonable(getattr(r, f.name))
        if f.name in _REPORT_HISTORY:
            history[_REPORT_HISTORY[f.name]] = value
        else:
            d[_REPORT_NAMES.get(f.name, f.name)] = value
    d["speedup"] = r.speedup
    d["finalists_within_noise"] = r.within_noise
    d["history"] = history
    return d


def _jsonable(value: Any) -> Any:
    from dataclasses import asdict, is_dataclass

    if hasattr(value, "to_dict"):
        return value.to_dict()
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return dict(value)
    return value


#: what each stop reason means, for the output (``search.stopping``'s reasons)
_STOP_NOTES = {
    "converged": "converged",
    "stalled": "no improvement beyond the noise in 4 x AUTOTUNE_STOP_PATIENCE evaluations",
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
    table = Table(title=f"{kernel}: best config per shape")
    for col in ("shape", "best config", "time", "TFLOP/s", "vs default", "evals", "failures (this run)"):
        table.add_column(col)
    for r in reports:
        fails = {k: v for k, v in r.statuses.items() if k != "ok"}
        table.add_row(
            r.shape_key,
            fmt_config(r.best.config) if r.best else "[red]none ok[/]",
            fmt_time(r.best.time_s) if r.best else "-",
            f"{r.best.tflops:.3g}" if r.best and r.best.tflops else "-",
            f"{r.speedup:.2f}x" if r.speedup else "-",
            f"{r.evaluations} (+{r.reused} reused" + (f", {r.busy} by others)" if r.busy else ")"),
            ", ".join(f"{k}={v}" for k, v in sorted(fails.items())) or "none",
        )
    out.print(table)
    for r in reports:
        _print_notes(r)


def _print_notes(r: ShapeReport) -> None:
    """Why the search stopped, what the strategy read from other keys, and the re-timed finalists, of one
    shape."""
    out.print(f"{r.shape_key}: {stop_note(r)}", highlight=False)
    if r.history_points:
        from autotune.search.auto import MIN_HISTORY

        few = r.strategy == "auto" and r.history_points < MIN_HISTORY
        out.print(
            f"{r.shape_key}: {r.strategy} read {r.history_points} measurements of this kernel under "
            f"{r.history_keys} other key(s) in the database"
            + (f" (too few for a prior: it needs {MIN_HISTORY})" if few else ""),
            highlight=False,
        )
    if r.finalists:
        rows = "; ".join(
            f"{fmt_time(f.median_s)} ±{(f.spread or 0) * 100:.1f}% (first {fmt_time(f.first_s)}, n={f.samples})"
            for f in r.finalists
        )
        noise = " - the top two are within noise of each other" if r.within_noise else ""
        out.print(f"{r.shape_key}: re-timed finalists (median, spread): {rows}{noise}")
