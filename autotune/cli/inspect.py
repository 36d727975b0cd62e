"""Reading the database: ``autotune best`` (JSON for scripts), ``show`` (a table), ``export`` (a file
``best_config`` reads without a database, or ``triton.Config`` lists)."""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from autotune.cli.common import DbOption, out
from autotune.errors import NotFoundError, SettingsError
from autotune.files import check_writable, write_text
from autotune.trial import fmt_time

if TYPE_CHECKING:
    from autotune.records import BestRecord
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
) -> None:
    """Print the stored best config(s) of KERNEL as JSON (for scripts)."""
    from autotune.shapes import parse_shape

    dims = parse_shape(shape) if shape else None
    store = _open(db)
    rows = [r for r in store.trials.best(kernel, device_name=device_name) if dims is None or r.dims == dims]
    if not rows:
        where = f" for {shape}" if shape else ""
        raise NotFoundError(f"no tuned config of {kernel!r}{where} in {store.masked_url}")
    data = [best_dict(r) for r in rows]
    typer.echo(json.dumps(data[0] if shape and len(data) == 1 else data, indent=2))


@app.command()
def show(
    db: DbOption = None,
    requests: Annotated[
        bool, typer.Option("--requests", help="Shapes best_config was asked for and had no tuned config for")
    ] = False,
) -> None:
    """List kernels, shapes, devices and studies with trial counts."""
    store = _open(db)
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
            fmt_time(r.best_time_s),
            f"{r.best_tflops:.3g}" if r.best_tflops else "-",
        )
    out.print(table)
    if not rows:
        out.print("nothing tuned yet: run `autotune search FILE`")


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
