"""``autotune show --requests``: the shapes production asked for and had no tuned config for."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autotune.store.protocols import StoreReader


def requests_table(store: StoreReader) -> Any:
    from rich.table import Table

    rows = store.requests.recorded()
    table = Table(title=f"shapes requested at run time (best_config fell back) in {store.masked_url}")
    for col in ("kernel", "shape", "dtypes", "device", "lookups", "first seen", "last seen"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r.kernel_name,
            r.shape_key,
            r.dtypes_key or "-",
            r.device_name,
            str(r.count),
            r.first_seen.strftime("%Y-%m-%d %H:%M:%S"),
            r.last_seen.strftime("%Y-%m-%d %H:%M:%S"),
        )
    if not rows:
        table.caption = (
            "none recorded: set AUTOTUNE_RECORD=1 (or best_config(..., record=True)) where kernels run"
        )
    return table
