"""The ``autotune`` command line (typer + rich).

Holds no logic a library user would also need: it parses, calls the library, and turns every
``AutotuneError`` into one line on stderr and exit code 2 (``NotFoundError``: exit code 1)."""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from autotune.errors import AutotuneError, DatabaseUnreachableError, NotFoundError, SettingsError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Find the fastest correct config of a GPU kernel and keep it in a database.",
)
db_app = typer.Typer(no_args_is_help=True, help="Database schema commands.")
app.add_typer(db_app, name="db")

# Wide when piped (logs, CI): rich would otherwise squeeze tables into 80 columns.
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db", help="Database URL or SQLite path [env: AUTOTUNE_DB]; default: the embedded SQLite file"
    ),
]
ShapesOption = Annotated[
    list[str] | None, typer.Option("--shape", help="e.g. M=4096,N=7168,K=2048 (repeatable)")
]


def mask_secrets(text: str) -> str:
    """Mask any password inside a URL in a message (user:***@host): the one masker, ``autotune.store.urls``."""
    from autotune.store.urls import mask_secrets as mask

    return mask(text)


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {mask_secrets(message)}", highlight=False, markup=True, soft_wrap=True)
    raise typer.Exit(code)


def handles_errors(fn):
    """Domain errors become one line and an exit code at the CLI edge."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except NotFoundError as exc:
            _fail(str(exc), code=1)
        except AutotuneError as exc:
            _fail(str(exc))
        except KeyboardInterrupt:
            _fail("interrupted; every finished trial is stored, run the same command to resume", code=130)

    return wrapper


def _store(db: str | None, *, readonly: bool = False, create: bool = False):
    from autotune.store import Store

    return Store.open(db, readonly=readonly, create=create)


def _is_new_db(store) -> bool:
    """No autotune schema yet (a missing SQLite file, or an empty database): search creates it."""
    return store.schema.missing()


def _discard_new_sqlite(created, store) -> None:
    try:
        created.result()
    except Exception:
        pass
    if store.db.sqlite_path:
        for suffix in ("", "-wal", "-shm", ".lock"):
            try:
                os.remove(store.db.sqlite_path + suffix)
            except OSError:
                pass


def _fmt_time(t: float | None) -> str:
    if t is None:
        return "-"
    if t >= 1e-3:
        return f"{t * 1e3:.3f} ms"
    return f"{t * 1e6:.2f} us"


def _fmt_config(config: dict[str, Any] | None) -> str:
    if not config:
        return "-"
    return ",".join(f"{k}={v}" for k, v in config.items())


@app.command()
@handles_errors
def search(
    file: Annotated[Path, typer.Argument(help="Kernel file declaring KERNEL (see README)")],
    shape: ShapesOption = None,
    trials: Annotated[
        int | None, typer.Option(help="New evaluations per shape [env: AUTOTUNE_TRIALS; default 40]")
    ] = None,
    timeout: Annotated[float | None, typer.Option(help="Wall-clock seconds per shape (0 = none)")] = None,
    strategy: Annotated[
        str | None,
        typer.Option(
            "--strategy",
            "--sampler",
            help="auto (default), tpe, random, exhaustive (= grid) [env: AUTOTUNE_STRATEGY]",
        ),
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Strategy seed")] = None,
    retime_top: Annotated[
        int | None,
        typer.Option(
            help="Finalists re-timed before a best is declared (default 3; 0 = none) [env: AUTOTUNE_RETIME_TOP]"
        ),
    ] = None,
    retime_rounds: Annotated[
        int | None,
        typer.Option(help="Interleaved re-timing rounds (default 3) [env: AUTOTUNE_RETIME_ROUNDS]"),
    ] = None,
    db: DbOption = None,
    devices: Annotated[
        str | None,
        typer.Option(
            "--devices",
            "--device",
            help="cuda, cuda:N, cuda:0,cuda:1, all or cpu (default: cuda if present) [env: AUTOTUNE_DEVICES]",
        ),
    ] = None,
    num_tests: Annotated[int | None, typer.Option(help="Timed calls per measurement")] = None,
    compile_timeout: Annotated[
        float | None, typer.Option(help="Seconds a config may take to compile")
    ] = None,
    run_timeout: Annotated[
        float | None, typer.Option(help="Seconds a config may take to check and time")
    ] = None,
    compile_workers: Annotated[
        int | None,
        typer.Option(help="Processes compiling ahead of the timing workers (default: cores - 1 with GPUs)"),
    ] = None,
    configs: Annotated[
        Path | None,
        typer.Option(
            "--configs", help="JSON list of configs: evaluate exactly these (e.g. a triton.Config list)"
        ),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the per-shape results as JSON")
    ] = None,
) -> None:
    """Search the fastest correct config of FILE's kernel for each shape; store every trial.

    Several processes (one per host, or per GPU) may run the same command against one database: claims
    in the database keep them from measuring a config twice."""
    from autotune.settings import SearchSettings
    from autotune.tuning.tuner import Tuner, parse_shapes

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
    shapes = parse_shapes(shape)
    if configs is not None and not configs.is_file():
        raise SettingsError(f"--configs {configs}: no such file")
    if not file.is_file():
        raise SettingsError(f"{file}: no such kernel file")
    from autotune.store import Store

    # Fail fast on an unreachable, outdated or newer database before the worker starts, read-only: nothing
    # is written until every input has been checked (a new SQLite file is created only then).
    store = Store(db, readonly=True)
    if not store.schema.missing():
        store.schema.check()

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
    tasks: dict[str, Any] = {}

    def on_event(ev) -> None:
        best = f"best {_fmt_time(ev.best.time_s)}" if ev.best else ""
        progress.update(tasks[format_shape(ev.shape)], completed=ev.evaluations, total=ev.budget, best=best)

    reports = []
    from concurrent.futures import ThreadPoolExecutor

    new_db = _is_new_db(store)
    with Tuner(str(file), None, settings, on_event=on_event) as tuner, ThreadPoolExecutor(1) as ex:
        # A new database is created while the workers start (both take seconds); if the kernel file turns
        # out bad, the new (empty) SQLite file is removed again: bad input leaves nothing behind.
        created = ex.submit(_store, db, create=True) if new_db else None
        try:
            info = tuner.start()
            resolved = tuner.resolve_shapes(shapes)
        except BaseException:
            if created is not None:
                _discard_new_sqlite(created, store)
            raise
        tuner.store = created.result() if created is not None else Store(db)
        if new_db:
            err.print(f"initialized a new autotune database at {store.masked_url}", highlight=False)
        devs = ", ".join(i.device for i in tuner.infos)
        err.print(
            f"kernel {info.meta.name} on {info.env['gpu_name']} ({devs}); {len(resolved)} shape(s); "
            f"strategy {settings.strategy}; {tuner.pipeline.compile_workers} compile worker(s); "
            f"db {store.masked_url}",
            highlight=False,
        )
        with progress:
            for s in resolved:
                key = format_shape(s)
                tasks[key] = progress.add_task(key, total=settings.trials, best="")
                try:
                    report = tuner.search_shape(s)
                except DatabaseUnreachableError as e:
                    raise DatabaseUnreachableError(
                        f"{e}; every finished trial is stored: rerun the same command to resume"
                    ) from None
                progress.update(tasks[key], completed=report.evaluations, total=max(report.evaluations, 1))
                reports.append(report)
    _print_reports(reports, info.meta.name)
    if json_out is not None:
        json_out.write_text(json.dumps([_report_dict(r) for r in reports], indent=2, default=str))


def _report_dict(r) -> dict[str, Any]:
    return {
        "shape": r.shape,
        "study": r.study_name,
        "evaluations": r.evaluations,
        "reused": r.reused,
        "invalid": r.invalid,
        "statuses": dict(r.statuses),
        "total_statuses": r.total_statuses,
        "valid_configs": r.valid_configs,
        "exhaustive": r.exhaustive,
        "wall_s": r.wall_s,
        "busy": r.busy,
        "budget": r.budget,
        "devices": list(r.devices),
        "loop_s_per_trial": r.loop_s_per_trial,
        "device_gap_s": list(r.device_gap_s) if r.device_gap_s else None,
        "best": r.best.to_dict() if r.best else None,
        "default": r.default.to_dict() if r.default else None,
        "speedup": r.speedup,
        "strategy": r.strategy,
        "finalists": [f.__dict__ for f in r.finalists],
        "finalists_within_noise": r.within_noise,
        "history": {"measurements": r.history_points, "keys": r.history_keys},
    }


def _print_reports(reports, kernel: str) -> None:
    table = Table(title=f"{kernel}: best config per shape")
    for col in ("shape", "best config", "time", "TFLOP/s", "vs default", "evals", "failures (this run)"):
        table.add_column(col)
    for r in reports:
        fails = {k: v for k, v in r.statuses.items() if k != "ok"}
        table.add_row(
            r.shape_key,
            _fmt_config(r.best.config) if r.best else "[red]none ok[/]",
            _fmt_time(r.best.time_s) if r.best else "-",
            f"{r.best.tflops:.3g}" if r.best and r.best.tflops else "-",
            f"{r.speedup:.2f}x" if r.speedup else "-",
            f"{r.evaluations} (+{r.reused} reused" + (f", {r.busy} by others)" if r.busy else ")"),
            ", ".join(f"{k}={v}" for k, v in sorted(fails.items())) or "none",
        )
    out.print(table)
    for r in reports:
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
                f"{_fmt_time(f.median_s)} ±{(f.spread or 0) * 100:.1f}% (first {_fmt_time(f.first_s)}, n={f.samples})"
                for f in r.finalists
            )
            noise = " - the top two are within noise of each other" if r.within_noise else ""
            out.print(f"{r.shape_key}: re-timed finalists (median, spread): {rows}{noise}")


@app.command()
@handles_errors
def best(
    kernel: Annotated[str, typer.Argument(help="Kernel name, e.g. gemm_fp8")],
    shape: Annotated[
        str | None, typer.Option(help="e.g. M=4096,N=7168,K=2048 (default: every tuned shape)")
    ] = None,
    device_name: Annotated[str | None, typer.Option(help="Device name as stored (default: any)")] = None,
    db: DbOption = None,
) -> None:
    """Print the stored best config(s) of KERNEL as JSON (for scripts)."""
    from autotune.shapes import parse_shape

    dims = parse_shape(shape) if shape else None
    store = _store(db, readonly=True)
    rows = [r for r in store.trials.best(kernel, device_name=device_name) if dims is None or r.dims == dims]
    if not rows:
        where = f" for {shape}" if shape else ""
        raise NotFoundError(f"no tuned config of {kernel!r}{where} in {store.masked_url}")
    data = [
        {
            "kernel": r.kernel_name,
            "shape": r.dims,
            "dtypes": r.dtypes,
            "device": r.device_name,
            "cc": r.cc,
            "config": r.config,
            "time_s": r.time_s,
            "samples": r.samples,
            "spread": r.spread,
            "tflops": r.tflops,
            "torch": r.torch,
            "triton": r.triton,
            "source_hash": r.source_hash,
            "space_hash": r.space_hash,
            "env_hash": r.env_hash,
            "updated_at": str(r.updated_at),
        }
        for r in rows
    ]
    typer.echo(json.dumps(data[0] if shape and len(data) == 1 else data, indent=2))


@app.command()
@handles_errors
def show(
    db: DbOption = None,
    requests: Annotated[
        bool, typer.Option("--requests", help="Shapes best_config was asked for and had no tuned config for")
    ] = False,
) -> None:
    """List kernels, shapes, devices and studies with trial counts."""
    store = _store(db, readonly=True)
    if requests:
        from autotune.jobs.nightly.requests_table import requests_table

        out.print(requests_table(store))
        return
    rows = store.history.key_states()
    table = Table(title=f"autotune database {store.masked_url}")
    for col in (
        "kernel",
        "shape",
        "device",
        "study",
        "trials",
        "by status",
        "running",
        "best time",
        "TFLOP/s",
    ):
        table.add_column(col)
    for r in sorted(rows, key=lambda r: (r.kernel_name, r.shape_key, r.key_id)):
        table.add_row(
            f"{r.kernel_name} ({r.source_hash[:8]})",
            r.shape_key,
            r.device_name,
            r.study_name,
            str(r.trials),
            ", ".join(f"{k}={v}" for k, v in sorted(r.counts.items())),
            str(r.running),
            _fmt_time(r.best_time_s),
            f"{r.best_tflops:.3g}" if r.best_tflops else "-",
        )
    out.print(table)
    if not rows:
        out.print("nothing tuned yet: run `autotune search FILE`")


@app.command()
@handles_errors
def export(
    out_file: Annotated[Path, typer.Option("--out", help="File to write, ending in .json (.py for triton)")],
    kernel: Annotated[str | None, typer.Option(help="Only this kernel (default: all)")] = None,
    db: DbOption = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format", help="json (for best_config) or triton (triton.Config lists per kernel and shape)"
        ),
    ] = "json",
) -> None:
    """Write the best configs to a JSON file that best_config() reads without a database (deployment)."""
    from datetime import datetime, timezone

    from autotune.records import EXPORT_FORMAT, EXPORT_VERSION

    if fmt not in ("json", "triton"):
        raise SettingsError(f"--format {fmt!r}: choose json or triton")
    if fmt == "triton":
        from autotune.runtime.triton_export import write_triton_configs

        n = write_triton_configs(_store(db, readonly=True), out_file, kernel=kernel)
        out.print(f"wrote {n} triton.Config lists to {out_file}", highlight=False)
        return
    if out_file.suffix != ".json":
        raise SettingsError(
            f"{out_file}: the export file's name must end in .json (best_config recognises it so)"
        )
    store = _store(db, readonly=True)
    kernels = [kernel] if kernel else sorted({r.kernel_name for r in store.history.key_states()})
    records = [r.to_json() for k in kernels for r in store.trials.best(k)]
    if not records:
        raise NotFoundError(f"nothing tuned{f' for {kernel!r}' if kernel else ''} in {store.masked_url}")
    doc = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": datetime.now(timezone.utc).isoformat(),
        "source": store.masked_url,
        "records": records,
    }
    tmp = out_file.with_name(out_file.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(out_file)  # atomic: a reader never sees half a file
    out.print(f"wrote {len(records)} best configs of {len(kernels)} kernel(s) to {out_file}", highlight=False)


@db_app.command("upgrade")
@handles_errors
def db_upgrade(db: DbOption = None) -> None:
    """Create or migrate the autotune schema to this version (safe to run concurrently)."""
    from autotune.store import Store

    store = Store(db)
    before, after = store.schema.upgrade()
    if before == after:
        out.print(f"{store.masked_url} is up to date (revision {after})", highlight=False)
    else:
        out.print(f"upgraded {store.masked_url} from {before or 'empty'} to {after}", highlight=False)


@db_app.command("check")
@handles_errors
def db_check(db: DbOption = None) -> None:
    """Exit 0 if the schema is current, else say what to run (exit 2)."""
    store = _store(db, readonly=True)
    current, head = store.schema.status()
    out.print(f"{store.masked_url}: revision {current} (current)", highlight=False)


@app.command()
@handles_errors
def check(
    file: Annotated[Path, typer.Argument(help="Kernel file to check against the contract")],
    shape: Annotated[
        str | None, typer.Option(help="Shape to run (default: the smallest default shape)")
    ] = None,
    device: Annotated[str | None, typer.Option(help="cuda or cpu (default: cuda if present)")] = None,
    time_it: Annotated[
        bool, typer.Option("--time/--no-time", help="Also time the default config by name")
    ] = True,
) -> None:
    """Conformance check of a kernel file: declarations, space, inputs, default config vs reference, timing."""
    from autotune.kernel.conformance import check_kernel_file_isolated
    from autotune.settings import SearchSettings
    from autotune.shapes import parse_shape

    if not file.is_file():
        raise SettingsError(f"{file}: no such kernel file")
    limits = SearchSettings()
    results = check_kernel_file_isolated(
        file,
        device=device or "",
        shape=parse_shape(shape) if shape else None,
        time_it=time_it,
        timeout_s=limits.start_timeout_s + limits.run_timeout_s,
    )
    failed = 0
    for r in results:
        mark = "[green]ok[/]  " if r.ok else "[red]FAIL[/]"
        failed += not r.ok
        out.print(f"{mark} {r.name}: {r.detail}", highlight=False)
    if failed:
        _fail(f"{file}: {failed} conformance check(s) failed")


@app.command()
@handles_errors
def space(
    path: Annotated[Path | None, typer.Argument(help="A search_spaces/*.yaml file")] = None,
    facts: Annotated[str, typer.Option(help="Device facts: h200, h100 or cpu")] = "h200",
    show_configs: Annotated[
        int,
        typer.Option(
            "--list",
            help="Print the first N valid configs (N random ones if the space is too large to count)",
        ),
    ] = 0,
    from_triton: Annotated[
        str | None,
        typer.Option(
            "--from-triton",
            help="FILE.py:NAME: make the space of a triton.Config list (an @autotune / @triton.autotune "
            "kernel, a TritonKernel or a list); YAML on stdout, or into --out and then checked",
        ),
    ] = None,
    out_path: Annotated[Path | None, typer.Option("--out", help="With --from-triton: write it here")] = None,
    product: Annotated[
        bool, typer.Option(help="With --from-triton: the full product of the values, not the listed set")
    ] = False,
) -> None:
    """Validate a search-space file and count its valid configs for a device.

    A space of at most 1,000,000 combinations before constraints (autotune.space.MAX_ENUMERATE) is
    counted exactly; a larger one is reported as too large to count (a search samples it) after a
    bounded check that it has a valid config. No valid config on the device: an error (exit 2)."""
    import random

    from autotune.env import DEVICE_PRESETS, device_facts
    from autotune.errors import SpaceError
    from autotune.space.space import MAX_ENUMERATE, Space, format_count

    if from_triton:
        from autotune.space.triton import dump_yaml, space_from_file

        text = dump_yaml(space_from_file(from_triton, product=product))
        if out_path is None:
            typer.echo(text, nl=False)
            return
        out_path.write_text(text)
        path = out_path
    elif path is None:
        raise SettingsError("give a space file (FILE.yaml), or --from-triton FILE.py:NAME")
    if facts == "cpu":
        fact_values = device_facts("cpu")
    elif facts in DEVICE_PRESETS:
        fact_values = DEVICE_PRESETS[facts]
    else:
        raise SettingsError(f"unknown device facts {facts!r}: choose cpu or {', '.join(DEVICE_PRESETS)}")
    sp = Space.from_yaml(path)
    size, exact = sp.size_info(fact_values)
    combos = f"{'' if exact else 'at most '}{format_count(size)} combinations"
    if size <= MAX_ENUMERATE:
        n = 0
        for cfg in sp.enumerate(fact_values):
            if n < show_configs:
                out.print(_fmt_config(cfg), highlight=False)
            n += 1
        if n == 0:
            every = f"all {combos} violate" if exact else "every combination violates"
            raise SpaceError(f"{sp.source}: no valid config on {facts}: {every} a constraint")
        summary = f"{combos}, {n:,} valid on {facts}"
    else:
        sp.find_valid(fact_values)  # SpaceError (exit 2) in bounded time when there is none
        for cfg in sp.sample_unique(random.Random(0), show_configs, fact_values):
            out.print(_fmt_config(cfg), highlight=False)
        summary = (
            f"too large to count exactly: {combos} (limit {MAX_ENUMERATE:,}); searched by sampling; "
            f"has valid configs on {facts}"
        )
    out.print(
        f"{sp.name}: {len(sp.params)} params, {summary}; hash {sp.hash()[:16]}",
        highlight=False,
        soft_wrap=True,
    )


@app.command()
@handles_errors
def bench(
    file: Annotated[Path, typer.Argument(help="Kernel file declaring KERNEL")],
    shape: ShapesOption = None,
    config: Annotated[
        str | None, typer.Option(help="Config as JSON (default: the kernel's default config)")
    ] = None,
    device: Annotated[str | None, typer.Option(help="cuda, cuda:N or cpu")] = None,
    num_tests: Annotated[int, typer.Option(help="Timed calls per measurement")] = 30,
) -> None:
    """Time one config (default: the kernel's default) on each shape with the L2-flushed Kineto bench."""
    from autotune.engine import EvalOptions, Worker
    from autotune.settings import SearchSettings
    from autotune.tuning.tuner import parse_shapes

    shapes = parse_shapes(shape)
    try:
        cfg = json.loads(config) if config else None
    except json.JSONDecodeError as exc:
        raise SettingsError(f"--config is not valid JSON: {exc}") from None
    if not file.is_file():
        raise SettingsError(f"{file}: no such kernel file")
    table = Table(title=f"{file.name}: Kineto device time, L2 flushed before each call")
    for col in ("shape", "config", "status", "time", "TFLOP/s", "GB/s", "spread"):
        table.add_column(col)
    defaults = SearchSettings()
    options = EvalOptions(
        num_tests=num_tests,
        compile_timeout_s=defaults.compile_timeout_s,
        run_timeout_s=defaults.run_timeout_s,
        start_timeout_s=defaults.start_timeout_s,
    )
    with Worker(str(file), device or "", options) as worker:
        info = worker.start()
        from autotune.shapes import check_shape, format_shape
        from autotune.space.space import Space

        sp = Space.from_dict(info.meta.space)
        cfg = sp.normalize(cfg) if cfg is not None else dict(info.meta.default_config)
        targets = [check_shape(s, info.meta.shape_params) for s in (shapes or info.meta.default_shapes)]
        for s in targets:
            r = worker.evaluate(cfg, s)
            table.add_row(
                format_shape(s),
                _fmt_config(cfg),
                r.status.value,
                _fmt_time(r.time_s),
                f"{r.tflops:.3g}" if r.tflops else "-",
                f"{r.gbps:.3g}" if r.gbps else "-",
                f"{r.spread:.1%}" if r.spread is not None else (r.error or "")[:60],
            )
    out.print(table)


@app.command()
@handles_errors
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
) -> None:
    """Run a nightly job: tune new and requested shapes, re-tune after upgrades, re-verify stored bests."""
    from autotune.jobs.nightly import load_job, run_job

    job = load_job(job_file)
    result = run_job(job, dry_run=dry_run, say=lambda line: err.print(line, highlight=False, markup=False))
    if job.report is not None and not dry_run:
        from autotune.jobs.report import write_report

        files = write_report(job.database, job.report, run_id=result.run_id)
        err.print(f"report: {', '.join(str(f) for f in files)}", highlight=False)
    if json_out is not None:
        json_out.write_text(json.dumps(result.summary(), indent=2, default=str))
    n_reg, n_conf = len(result.regressions), len(result.confirmed)
    err.print(
        f"nightly {job.name}: {'planned' if dry_run else 'done'} in {result.wall_s:.1f} s; "
        f"{len(result.verifications)} verified, {n_reg} regression(s), {n_conf} confirmed"
        + (f"; stopped: {result.stopped}" if result.stopped else ""),
        highlight=False,
    )
    for e in result.errors:
        err.print(f"[bold red]error:[/] {mask_secrets(e)}", highlight=False, soft_wrap=True)
    code = result.exit_code(fail_on_regression)
    if code:
        raise typer.Exit(code)


@app.command()
@handles_errors
def report(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for report.html, report.md, report.json")],
    db: DbOption = None,
    since: Annotated[
        str | None, typer.Option(help="Only history since this ISO date (or e.g. 7d, 24h)")
    ] = None,
) -> None:
    """Write the tuning report: HTML with plots, the same as Markdown and JSON."""
    from autotune.jobs.report import parse_since, write_report

    files = write_report(db, out_dir, since=parse_since(since) if since else None)
    out.print(f"wrote {', '.join(str(f) for f in files)}", highlight=False)


landscape_app = typer.Typer(
    no_args_is_help=True, help="Landscape files: every config of a space measured on a shape."
)
app.add_typer(landscape_app, name="landscape")


@landscape_app.command("export")
@handles_errors
def landscape_export(
    kernel: Annotated[str, typer.Argument(help="Kernel name")],
    shape: Annotated[str, typer.Option("--shape", help="The shape, e.g. M=64,N=2112,K=7168")],
    out: Annotated[Path, typer.Option("--out", help="File to write")],
    device: Annotated[str | None, typer.Option(help="GPU model (default: the newest key's)")] = None,
    db: DbOption = None,
) -> None:
    """Write the search trials of a key as a landscape file (the format `autotune replay` reads)."""
    from autotune.shapes import format_shape, parse_shape
    from autotune.tuning.landscape import export_landscape

    store = _store(db, readonly=True)
    land = export_landscape(store, kernel, format_shape(parse_shape(shape)), device)
    out.write_text(json.dumps(land.to_json(), indent=1))
    typer.echo(f"wrote {out}: {len(land.results)} configs of {kernel} {land.shape_key} on {land.device_name}")


@app.command()
@handles_errors
def replay(
    landscapes: Annotated[list[Path], typer.Argument(help="Landscape files (one shape each)")],
    strategy: Annotated[str, typer.Option(help="Strategies, comma-separated")] = "auto,tpe",
    evaluations: Annotated[int, typer.Option(help="Evaluations per search")] = 40,
    budgets: Annotated[
        str | None, typer.Option(help="Budgets to report, comma-separated (default 10,20,EVALUATIONS)")
    ] = None,
    seeds: Annotated[int, typer.Option(help="Seeds per shape and strategy")] = 10,
    transfer: Annotated[
        bool,
        typer.Option(help="Other landscapes of the same kernel in the store (leave-one-shape-out)"),
    ] = True,
    preload: Annotated[
        list[Path] | None, typer.Option(help="More landscapes put in the store as training data")
    ] = None,
    kernel: Annotated[
        Path | None, typer.Option(help="Kernel file: its features() hook feeds the auto strategy")
    ] = None,
    depth: Annotated[int, typer.Option(help="Proposals in flight (the H200 pipeline's: 19)")] = 19,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write every run as JSON")] = None,
) -> None:
    """Replay strategies offline on recorded landscapes: regret per shape, budget and seed."""
    from autotune.search import strategy_names
    from autotune.tuning import replay as rp
    from autotune.tuning.landscape import load_landscape

    names = [s.strip() for s in strategy.split(",") if s.strip()]
    bad = [n for n in names if n not in strategy_names()]
    if bad or not names:
        raise SettingsError(f"--strategy {strategy!r}: choose from {', '.join(strategy_names())}")
    if evaluations < 1 or seeds < 1 or depth < 1:
        raise SettingsError("--evaluations, --seeds and --depth must be at least 1")
    try:
        report_at = sorted({int(b) for b in budgets.split(",")}) if budgets else sorted({10, 20, evaluations})
    except ValueError:
        raise SettingsError(f"--budgets {budgets!r}: comma-separated integers") from None
    report_at = [b for b in report_at if 1 <= b <= evaluations]
    targets = [load_landscape(p) for p in landscapes]
    extra = [load_landscape(p) for p in preload or ()]
    logging.getLogger("autotune").setLevel(logging.WARNING)
    with rp.kernel_features(str(kernel)) if kernel else nullcontext() as feats:
        runs = rp.replay(
            targets,
            names,
            evaluations,
            range(seeds),
            transfer=transfer,
            preload=extra,
            features_for=feats,
            depth=depth,
        )
    for line in rp.format_table(runs, report_at):
        typer.echo(line)
    if json_out:
        json_out.write_text(json.dumps([r.__dict__ for r in runs], indent=1))


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        from autotune.settings import check_environment

        try:
            check_environment()  # a bad AUTOTUNE_* value: one line, exit 2, before anything runs
        except AutotuneError as exc:
            err.print(f"[bold red]error:[/] {mask_secrets(str(exc))}", highlight=False, soft_wrap=True)
            sys.exit(2)
        app()
    except SystemExit:
        raise
    except Exception as exc:  # a bug, not a user error: still never print a password
        err.print(
            f"[bold red]internal error:[/] {mask_secrets(f'{type(exc).__name__}: {exc}')}", highlight=False
        )
        sys.exit(3)


if __name__ == "__main__":
    main()
