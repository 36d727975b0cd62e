"""``autotune serve`` (the tuning service, ``autotune.service``) and ``autotune request`` (queue a shape for
it)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from autotune.cli.common import DbOption, DevicesOption, ShapesOption, out
from autotune.errors import SettingsError

if TYPE_CHECKING:
    from autotune.store import Service, Store

app = typer.Typer()

KernelsOption = Annotated[
    list[Path],
    typer.Option(
        "--kernels",
        help="Kernel file, or folder of kernel files, the service may run (repeatable); requests for any "
        "other kernel are refused",
    ),
]
JobOption = Annotated[
    Path | None,
    typer.Option(
        "--job",
        help="Nightly job file (YAML) with a cron `schedule:` (UTC): the service runs it then, on its warm "
        "workers; its kernel files are served too; SIGHUP reads it again",
    ),
]
MetricsPortOption = Annotated[
    int | None,
    typer.Option(
        "--metrics-port",
        min=0,
        max=65535,
        help="Serve Prometheus metrics (/metrics) and health probes (/healthz liveness, /readyz readiness) "
        "on this TCP port (0: any free port, said in the log)",
    ),
]
MetricsHostOption = Annotated[
    str, typer.Option("--metrics-host", help="Address the metrics port listens on (default: every interface)")
]
LogFormatOption = Annotated[
    str, typer.Option("--log-format", help="text, or json: one JSON object per line (log collectors)")
]


def kernel_files(given: list[Path]) -> list[Path]:
    """The files of ``--kernels``: a folder stands for its ``*.py`` files (not ``_private.py`` ones)."""
    files: list[Path] = []
    for p in given:
        if p.is_dir():
            found = sorted(f for f in p.glob("*.py") if not f.name.startswith("_"))
            if not found:
                raise SettingsError(f"--kernels {p}: no kernel files (*.py) in this folder")
            files += found
        elif p.is_file():
            files.append(p)
        else:
            raise SettingsError(f"--kernels {p}: no such kernel file or folder")
    if not files:
        raise SettingsError("--kernels: give at least one kernel file")
    return files


@app.command()
def serve(
    kernels: KernelsOption,
    db: DbOption = None,
    devices: DevicesOption = None,
    job: JobOption = None,
    log_format: LogFormatOption = "text",
    metrics_port: MetricsPortOption = None,
    metrics_host: MetricsHostOption = "",
) -> None:
    """Tune the shapes production asks for: keep the workers of each kernel file warm and work the queue
    of requests in the database (recorded best_config misses, `autotune request`) until SIGTERM.

    Run one per GPU host (or per GPU); any number share one database."""
    from autotune.service.events import FORMATS, EventLog
    from autotune.settings import SearchSettings, serve_settings

    if log_format not in FORMATS:
        raise SettingsError(f"--log-format {log_format!r}: choose text or json")
    files = kernel_files(kernels)
    the_job = None
    if job is not None:
        from autotune.jobs.nightly import load_job

        the_job = load_job(job)
        # the job's kernel files are the operator's too: served beside --kernels
        files += [k.file for k in the_job.kernels if k.file.resolve() not in {f.resolve() for f in files}]
        if devices is None:
            devices = the_job.devices
        elif the_job.devices is not None and the_job.devices != devices:
            raise SettingsError(f"{job}: devices: {the_job.devices} is not the service's --devices {devices}")
    settings = SearchSettings.from_options(devices=devices)
    timing = serve_settings()
    from autotune.service.loop import Service, check_job
    from autotune.store import Store

    if the_job is not None:
        check_job(the_job, files)
    store = Store.open(db, create=True)
    try:
        _check_job_database(the_job, store)
        log = EventLog(log_format)
        log.capture_logging()  # autotune's and its libraries' warnings in the same format, never plain lines
        service = Service(
            files,
            store,
            settings,
            timing,
            log,
            job=the_job,
            metrics_port=metrics_port,
            metrics_host=metrics_host,
        )
        _run_logged(service, log)
    finally:
        store.close()


def _run_logged(service: Any, log: Any) -> None:
    """Run the service; with ``--log-format json`` the error that ends it is a JSON event too (exit 2, or
    3 for a bug), never a plain line among the JSON ones."""
    from autotune.errors import AutotuneError, NotFoundError
    from autotune.store.urls import mask_secrets

    try:
        service.run()
    except AutotuneError as e:
        if log.fmt != "json":
            raise
        log("error", mask_secrets(str(e)))
        raise typer.Exit(1 if isinstance(e, NotFoundError) else 2) from None
    except Exception as e:
        if log.fmt != "json":
            raise
        log("internal-error", mask_secrets(f"{type(e).__name__}: {e}"))
        raise typer.Exit(3) from None


def _check_job_database(job: Any, store: Store) -> None:
    """A job file's ``database:``, if it names one, is the service's."""
    if job is None or job.database is None:
        return
    from autotune.store.urls import mask_url, normalize_db_url

    if normalize_db_url(job.database) != store.db.url:
        raise SettingsError(
            f"{job.path}: database: {mask_url(normalize_db_url(job.database))} is not the service's "
            f"database {store.masked_url} (leave it out: the service's is used)"
        )


@app.command()
def request(
    file: Annotated[Path, typer.Argument(help="Kernel file declaring KERNEL: its name is what is queued")],
    shape: ShapesOption = None,
    device: Annotated[
        str | None,
        typer.Option(
            help="cpu, cuda or cuda:N: the device whose model is asked for (default: that of a service of "
            "this host running FILE, else cuda if present)"
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Queue shapes of FILE's kernel for `autotune serve` (a running service tunes them; one that is done
    or refused is queued again)."""
    from autotune.shapes import check_shape, format_shape, parse_shape

    parsed = [parse_shape(t) for t in shape or []]
    if not parsed:
        raise SettingsError("give at least one --shape, e.g. --shape M=4096,N=7168,K=2048")
    if device is not None and device != "cpu" and not device.startswith("cuda"):
        raise SettingsError(f"--device {device!r}: choose cpu, cuda or cuda:N")
    if not file.is_file():
        raise SettingsError(f"{file}: no such kernel file")
    from autotune.store import Store

    with Store.open(db, create=True) as store:
        kernel, device_name = _kernel_of(file, device, store)
        name, params = str(kernel["name"]), tuple(kernel.get("shape_params") or ())
        for s in [check_shape(s, params) for s in parsed]:
            # dtypes "": the kernel's declared ones, as a recorded miss that names none (one row for both);
            # the version: this file's source (a service running another version of the kernel leaves it;
            # its space is the file's, whichever service runs it: no space hash, so one row either way)
            request_id = store.services.enqueue(
                name, s, format_shape(s), device_name, source_hash=str(kernel["source_hash"])
            )
            out.print(
                f"queued {name} {format_shape(s)} on {device_name} (request {request_id})", highlight=False
            )


def _kernel_of(file: Path, device: str | None, store: Store) -> tuple[dict[str, Any], str]:
    """FILE's kernel entry ({"name", "source_hash", "shape_params"[, "space_hash"]}) and the stored device
    name. A live service of this host running the same file (by its hash) knows them: the file is not
    imported (seconds of torch). Otherwise the file is read in a child process (a file that exits, crashes
    or hangs at import is one line, never this command's end) and the device named here."""
    import socket

    from autotune.env import cpu_name
    from autotune.kernel.contract import source_hash
    from autotune.settings import serve_settings

    digest = source_hash(file)
    found = store.services.serving(digest, socket.gethostname(), lease_s=serve_settings().lease_s)
    for service, kernel in found:
        if device is None or device == "cpu":
            wanted = cpu_name() if device == "cpu" else service.device_name
            if wanted and wanted == service.device_name:
                return dict(kernel), wanted
    from autotune.kernel.isolated import run_isolated

    name, params, device_name = run_isolated(
        _describe,
        str(file),
        device or "",
        path=file,
        doing="reading the kernel file",
        timeout_s=120.0,
        timeout_hint="120 s to import it",
    )
    return {"name": name, "source_hash": digest, "shape_params": list(params)}, device_name


def _describe(file: str, device: str) -> tuple[str, tuple[str, ...], str]:
    """In the child: the kernel's name, shape parameters, and the stored name of ``device`` ("" = cuda if
    present, else the CPU). A device asked for and absent is a ``SettingsError``: one line, exit 2."""
    from autotune.env import current_device_name
    from autotune.kernel.contract import load_kernel_file

    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise SettingsError(
                f"--device {device}: no CUDA GPU here (use --device cpu, or run it on a GPU host)"
            )
    loaded = load_kernel_file(file)
    return loaded.name, tuple(loaded.shape_params), current_device_name(device)


def print_services(store: Store, fmt: str) -> None:
    """``autotune show --services``: every service row; one that stopped beating for a lease is ``dead``
    (killed with -9, or its host lost: its request is taken over by another)."""
    import json
    from dataclasses import asdict

    from autotune.plain_table import PlainTable as Table
    from autotune.settings import serve_settings

    now, lease_s = store.db.now(), serve_settings().lease_s
    rows = store.services.listed()

    def state(x: Service) -> str:
        return x.state if x.state == "stopped" or x.alive(now, lease_s) else "dead"

    if fmt == "json":
        data = [asdict(x) | {"kernels": list(x.kernels), "state": state(x)} for x in rows]
        typer.echo(json.dumps(data, indent=2, default=str))
        return
    table = Table(title=f"autotune services in {store.masked_url}")
    for col in ("host", "pid", "device", "devices", "kernels", "state", "request", "started", "last beat"):
        table.add_column(col)
    for x in rows:
        table.add_row(
            x.host,
            str(x.pid),
            x.device_name or "-",
            x.devices,
            ", ".join(x.kernels) or "-",
            state(x),
            str(x.request_id) if x.request_id is not None else "-",
            x.started.strftime("%Y-%m-%d %H:%M:%S"),
            f"{(now - x.last_beat).total_seconds():.0f} s ago",
        )
    out.print(table)
    if not rows:
        out.print("no service has run against this database: start one with `autotune serve --kernels FILE`")
