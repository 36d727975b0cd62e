"""A rich ``Table`` whose title and cells are plain text, never console markup: a kernel named ``[/x]`` (or
a shape, an error, a host name: anything stored) crashed ``autotune show``, ``trials`` and the final table
with rich's ``MarkupError``, and ``[bold]`` in one would have been rendered (issue 45)."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text


class PlainTable(Table):
    def __init__(self, *columns: Any, title: str | None = None, **kwargs: Any) -> None:
        super().__init__(*columns, title=Text(title) if title is not None else None, **kwargs)

    def add_row(self, *renderables: Any, **kwargs: Any) -> None:
        super().add_row(*(Text(x) if isinstance(x, str) else x for x in renderables), **kwargs)
