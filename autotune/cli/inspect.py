"""Reading the database: ``autotune best`` (the best configs), ``show`` (every key), ``trials`` (a key's
trials with their errors), each as JSON or a table (``-f``); ``export`` (a file ``best_config`` reads
without a database, or ``triton.Config`` lists)."""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from autotune.cli.common import DbOption, ShapesOption, fmt_config, opt_help, out
from autotune.errors import NotFoundError, SettingsError
from autotune.files import check_writable, write_text
from autotune.plain_table import PlainTable as Table
from autotune.stats import Ratio
from autotune.trial import fmt_time, fmt_time_interval

if TYPE_CHECKING:
    from autotune.records import BestRecord, KeyState
    from autotune.shapes import Shape
    from autotune.store import Store

app = typer.Typer()

#: the names ``autotune best`` has always printed for these BestRecord fields
_BEST_NAMES = {"kernel_name": "kernel", "dims": "shape", "device_name": "device"}
#: the store's bookkeeping, left out: the shape's text form and the row ids
_BEST_HIDDEN = frozenset({"shape_key", "key_id", "trial_id"})


def best_dict(r: BestRecord) -> dict[str, Any]:
    """A best row as ``autotune best`` prints it: every ``BestRecord`` field (a new one needs no edit
    here) but the bookkeeping, times as text."""
    d: dict[str, Any] = {}
    for f in fields(r):
        if f.name not in _BEST_HIDDEN:
            value = getattr(r, f.name)
            d[_BEST_NAMES.get(f.name, f.name)] = str(value) if isinstance(value, datetime) else value
    return d


def format_option(default: str) -> Any:
    """``-f/--format json|table``, as Optuna's CLI: JSON for scripts, a table for people."""
    return typer.Option("--format", "-f", help=opt_help("json or table", default=default))


def _check_format(fmt: str) -> str:
    if fmt not in ("json", "table"):
        raise SettingsError(f"--format {fmt!r}: choose json or table")
    return fmt


def _jsonable(value: Any) -> Any:
    return str(value) if isinstance(value, datetime) else value


def _key_states(store: Store, kernel: str, what: str) -> list[KeyState]:
    """The keys of ``kernel``; none: ``NotFoundError`` naming ``what`` was looked for, with the kernels the
    database knows (and the one ``kernel`` most likely misspells)."""
    from autotune.shapes import closest

    states = store.history.key_states(kernel)
    if states:
        return states
    known = sorted({s.kernel_name for s in store.history.key_states()})
    hint = ""
    if known:
        near = closest(kernel, known)
        hint = (f"; did you mean {near!r}?" if near else "") + f" (known kernels: {', '.join(known)})"
    raise NotFoundError(f"no {what} of {kernel!r} in {store.masked_url}{hint}")


def _shape_dims(text: str, dims: Shape, states: list[KeyState]) -> Shape:
    """``--shape`` (``text``, parsed: ``dims``), its names checked against the kernel's stored shapes (a
    typo: one line, with a did-you-mean)."""
    from autotune.shapes import check_shape

    params = list(states[0].dims)
    if set(dims) != set(params):
        check_shape(dims, params, what=repr(text))  # raises ShapeError naming the unknown and missing names
    return {p: dims[p] for p in params}


def _open(db: str | None) -> Store:
    from autotune.store import Store

    return Store.open(db, create=False, readonly=True)


@app.command()
def best(
    kernel: Annotated[str, typer.Argument(help="Kernel name, e.g. gemm_fp8")],
    shape: Annotated[
        str | None, typer.Option(help="e.g. M=4096,N=7168,K=2048 (default: every tuned shape)")
    ] = None,
    device_name: Annotated[str | None, typer.Option(help="Device name as stored (default: any)")] = None,
    db: DbOption = None,
    fmt: Annotated[str, format_option("json")] = "json",
) -> None:
    """Print the stored best config(s) of KERNEL: JSON (for scripts) or a table."""
    from autotune.shapes import parse_shape

    _check_format(fmt)
    parsed = parse_shape(shape) if shape else None  # bad input fails before the database is opened
    store = _open(db)
    states = _key_states(store, kernel, "tuned config")
    dims = _shape_dims(shape, parsed, states) if shape and parsed else None
    rows = [r for r in store.trials.best(kernel, device_name=device_name) if dims is None or r.dims == dims]
    if not rows:
        where = f" for {shape}" if shape else ""
        raise NotFoundError(f"no tuned config of {kernel!r}{where} in {store.masked_url}")
    if fmt == "table":
        table = Table(title=f"{kernel}: best configs in {store.masked_url}")
        cols = ("shape", "device", "config", "time [95 % interval]", "TFLOP/s", "vs default", "samples")
        for col in (*cols, "spread", "source"):
            table.add_column(col, overflow="fold")  # a config is never cut: it folds onto more lines
        for r in rows:
            table.add_row(
                r.shape_key,
                r.device_name,
                fmt_config(r.config),
                fmt_time_interval(r.time_s, r.ci_low_s, r.ci_high_s),
                f"{r.tflops:.3g}" if r.tflops else "-",
                Ratio(r.speedup, r.speedup_low, r.speedup_high, r.pairs or 0).text() if r.speedup else "-",
                str(r.samples or 1),
                f"±{r.spread * 100:.1f}%" if r.spread is not None else "-",
                r.source_hash[:8],
            )
        out.print(table)
        return
    data = [best_dict(r) for r in rows]
    typer.echo(json.dumps(data[0] if shape and len(data) == 1 else data, indent=2))


@app.command()
def show(
    db: DbOption = None,
    requests: Annotated[
        bool, typer.Option("--requests", help="Shapes best_config was asked for and had no tuned config for")
    ] = False,
    services: Annotated[
        bool, typer.Option("--services", help="The `autotune serve` processes: heartbeats, what they work on")
    ] = False,
    fmt: Annotated[str, format_option("table")] = "table",
) -> None:
    """List kernels, shapes, devices and studies with trial counts."""
    _check_format(fmt)
    store = _open(db)
    if services:
        from autotune.cli.serve import print_services

        print_services(store, fmt)
        return
    if requests:
        _print_requests(store, fmt)
        return
    rows = sorted(store.history.key_states(), key=lambda r: (r.kernel_name, r.shape_key, r.key_id))
    if fmt == "json":
        from dataclasses import asdict

        data = [{k: _jsonable(v) for k, v in asdict(r).items()} | {"trials": r.trials} for r in rows]
        typer.echo(json.dumps(data, indent=2))
        return
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
    for r in rows:
        table.add_row(
            f"{r.kernel_name} ({r.source_hash[:8]})",
            r.shape_key,
            r.device_name,
            r.study_name,
            str(r.trials),
            ", ".join(f"{k}={v}" for k, v in sorted(r.counts.items())),
            str(r.running),
            fmt_time(r.best_time_s),
            f"{r.best_tflops:.3g}" if r.best_tflops else "-",
        )
    out.print(table)
    if not rows:
        out.print("nothing tuned yet: run `autotune search FILE`")


def _print_requests(store: Any, fmt: str) -> None:
    """``show --requests``: a table with each request's status, or JSON."""
    from autotune.jobs.nightly.requests_table import requests_json, requests_table

    if fmt == "json":
        typer.echo(json.dumps(requests_json(store), indent=2, default=str))
    else:
        out.print(requests_table(store))


@app.command()
def trials(
    kernel: Annotated[str, typer.Argument(help="Kernel name, e.g. gemm_fp8")],
    shape: ShapesOption = None,
    status: Annotated[
        list[str] | None,
        typer.Option(help="Only trials of this status: ok, invalid, timeout, crashed, ... (repeatable)"),
    ] = None,
    device_name: Annotated[str | None, typer.Option(help="Device name as stored (default: any)")] = None,
    db: DbOption = None,
    fmt: Annotated[str, format_option("table")] = "table",
) -> None:
    """List the stored trials of KERNEL (each shape, device and source) with their status and error."""
    from autotune.shapes import parse_shape

    _check_format(fmt)
    wanted = _statuses(status)
    parsed = [(s, parse_shape(s)) for s in shape or ()]  # bad input fails before the database is opened
    store = _open(db)
    states = _key_states(store, kernel, "trials")
    shapes = [_shape_dims(text, dims, states) for text, dims in parsed]
    keys = [
        k
        for k in states
        if (not shapes or k.dims in shapes) and (device_name is None or k.device_name == device_name)
    ]
    rows = [
        (k, t)
        for k in keys
        for t in store.trials.recorded(k.key_id, retimed=True)
        if not wanted or t.status.value in wanted
    ]
    if fmt == "json":
        data = [
            {"shape": k.shape_key, "device": k.device_name, "source_hash": k.source_hash, **t.to_dict()}
            for k, t in rows
        ]
        typer.echo(json.dumps(data, indent=2, default=str))
        return
    table = Table(title=f"{kernel}: {len(rows)} trial(s) in {store.masked_url}")
    for col in ("shape", "device", "config", "status", "time", "TFLOP/s", "kind", "error"):
        table.add_column(col, overflow="fold" if col == "config" else "ellipsis")
    for k, t in rows:
        table.add_row(
            k.shape_key,
            k.device_name,
            fmt_config(t.config),
            t.status.value,
            fmt_time(t.time_s),
            f"{t.tflops:.3g}" if t.tflops else "-",
            t.kind,
            _last_line(t.error),
        )
    out.print(table)


def _last_line(error: str | None) -> str:
    """The line of an error that says what went wrong (a traceback's last); the table shows it as plain
    text (``PlainTable``)."""

    lines = (error or "").strip().splitlines()
    return lines[-1][:160] if lines else ""


def _statuses(given: list[str] | None) -> set[str]:
    """``--status`` values, each a trial status (a typo: one line with a did-you-mean)."""
    from autotune.shapes import closest
    from autotune.trial import TrialStatus

    known = [s.value for s in TrialStatus]
    for name in given or ():
        if name not in known:
            near = closest(name, known)
            hint = f"did you mean {near}? " if near else ""
            raise SettingsError(f"--status {name!r}: {hint}choose from {', '.join(known)}")
    return set(given or ())


@app.command()
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
    if fmt not in ("json", "triton"):
        raise SettingsError(f"--format {fmt!r}: choose json or triton")
    check_writable(out_file)
    if fmt == "triton":
        from autotune.runtime.triton_export import write_triton_configs

        n = write_triton_configs(_open(db), out_file, kernel=kernel)
        out.print(f"wrote {n} triton.Config lists to {out_file}", highlight=False)
        return
    if out_file.suffix != ".json":
        raise SettingsError(
            f"{out_file}: the export file's name must end in .json (best_config recognises it so)"
        )
    _export_json(_open(db), out_file, kernel)


def _export_json(store: Store, out_file: Path, kernel: str | None) -> None:
    from datetime import timezone

    from autotune.records import EXPORT_FORMAT, EXPORT_VERSION

    if kernel:
        _key_states(store, kernel, "tuned config")  # an unknown name: exit 1 with the known kernels
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
    write_text(out_file, json.dumps(doc, indent=1))  # atomic: a reader never sees half a file
    out.print(f"wrote {len(records)} best configs of {len(kernels)} kernel(s) to {out_file}", highlight=False)
