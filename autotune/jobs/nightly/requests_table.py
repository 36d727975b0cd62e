"""``autotune show --requests``: the shapes production asked for and had no tuned config for, and why the
nightly job skips a request it cannot tune (the same reason its plan and report give)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autotune.store.protocols import StoreReader


def skip_reasons(store: StoreReader) -> dict[tuple[str, str], str]:
    """(kernel, shape key) -> why the newest nightly run that skipped the request did so (e.g. its
    inputs could not be built: found only by trying, so only a run knows it)."""
    from autotune.jobs.report.markdown import skipped_requests

    reasons: dict[tuple[str, str], str] = {}
    for run in reversed(store.verifications.runs()):
        for kernel, skipped in skipped_requests(run.summary or {}):
            key, sep, why = skipped.partition(" (")
            if sep and why.endswith(")"):
                reasons.setdefault((kernel, key), why[:-1])
    return reasons


def request_reason(r: Any, params: tuple[str, ...] | None, runs: dict[tuple[str, str], str]) -> str:
    """Why the nightly job does not tune request ``r`` ("" when it does): checked against the kernel's
    shape parameters as its tuning keys name them (the request's own names when nothing is tuned yet),
    else what the last run found."""
    from autotune.jobs.nightly.planner import clip_key, request_problem

    dims = r.dims if isinstance(r.dims, dict) else None
    why = request_problem(r.dims, params if params is not None else tuple(dims or ()))
    return why or runs.get((r.kernel_name, clip_key(str(r.shape_key))), "")


def _reasons(store: StoreReader) -> tuple[list[Any], list[str]]:
    """The recorded requests and why each is not tuned ("" when nothing stands in the way)."""
    rows = store.requests.recorded()
    params: dict[str, tuple[str, ...]] = {}
    for k in store.history.key_states():
        params.setdefault(k.kernel_name, tuple(k.dims))
    runs = skip_reasons(store)
    reasons = [
        # else why `autotune serve` refused it
        request_reason(r, params.get(r.kernel_name), runs)
        or (f"serve: {r.message[:100]}" if r.status == "refused" and r.message else "")
        for r in rows
    ]
    return rows, reasons


def requests_json(store: StoreReader) -> list[dict[str, Any]]:
    """``autotune show --requests -f json``: every request with its queue status and why it is skipped."""
    from dataclasses import asdict

    rows, reasons = _reasons(store)
    return [
        asdict(r)
        | {"first_seen": r.first_seen.isoformat(), "last_seen": r.last_seen.isoformat(), "skipped": why}
        for r, why in zip(rows, reasons, strict=True)
    ]


def requests_table(store: StoreReader) -> Any:
    from autotune.plain_table import PlainTable as Table

    rows, reasons = _reasons(store)
    table = Table(title=f"shapes requested at run time (best_config fell back) in {store.masked_url}")
    for col in (
        "kernel",
        "shape",
        "dtypes",
        "device",
        "lookups",
        "status",
        "first seen",
        "last seen",
        "skipped because",
    ):
        table.add_column(col)
    for r, why in zip(rows, reasons, strict=True):
        table.add_row(
            r.kernel_name,
            r.shape_key,
            r.dtypes_key or "-",
            r.device_name,
            str(r.count),
            r.status,
            r.first_seen.strftime("%Y-%m-%d %H:%M:%S"),
            r.last_seen.strftime("%Y-%m-%d %H:%M:%S"),
            why or "-",
        )
    if not rows:
        table.caption = (
            "none recorded: set AUTOTUNE_RECORD=1 (or best_config(..., record=True)) where kernels run"
        )
    return table
