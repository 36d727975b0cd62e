"""What the command modules share: the consoles, the option types used by several commands, the one-line
failure, number and config formatting, the strategy-name check."""

from __future__ import annotations

import sys
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from autotune.errors import SettingsError
from autotune.trial import fmt_config  # noqa: F401  (the one formatter, shared with the progress lines)

# Wide when piped (logs, CI): rich would otherwise squeeze tables into 80 columns.
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)


def opt_help(text: str, *, env: str | None = None, default: object = None) -> str:
    """An option's help with its environment variable and default as ``[env: VAR; default: X]``.

    Typer renders help as rich markup, where a bare ``[env: AUTOTUNE_DB]`` is a style tag and vanishes;
    the suffix is escaped so that it reaches the screen. Use it for every option that has either."""
    parts = ([f"env: {env}"] if env else []) + ([f"default: {default}"] if default is not None else [])
    return f"{text} {escape('[' + '; '.join(parts) + ']')}" if parts else text


#: `search` and `serve`: the devices timed on
DevicesOption = Annotated[
    str | None,
    typer.Option(
        "--devices",
        "--device",
        help=opt_help(
            "cuda, cuda:N, cuda:0,cuda:1, all or cpu", env="AUTOTUNE_DEVICES", default="cuda if present"
        ),
    ),
]


DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help=opt_help("Database URL or SQLite path", env="AUTOTUNE_DB", default="the embedded SQLite file"),
    ),
]
ShapesOption = Annotated[
    list[str] | None, typer.Option("--shape", help="e.g. M=4096,N=7168,K=2048 (repeatable)")
]


def mask_secrets(text: str) -> str:
    """Mask any password inside a URL in a message (user:***@host): the one masker, ``autotune.store.urls``."""
    from autotune.store.urls import mask_secrets as mask

    return mask(text)


def say_error(message: str) -> None:
    """One ``error:`` line on stderr, any password in it masked."""
    err.print(f"[bold red]error:[/] {mask_secrets(message)}", highlight=False, markup=True, soft_wrap=True)


def fail(message: str, code: int = 2) -> NoReturn:
    say_error(message)
    raise typer.Exit(code)


def check_strategy(name: str) -> str:
    """``name`` if the strategy registry knows it (``autotune.search`` holds the names, so settings need not
    import it), else a ``SettingsError``."""
    from autotune.search import strategy_names

    if name not in strategy_names():
        raise SettingsError(f"unknown strategy {name!r}: choose one of {', '.join(strategy_names())}")
    return name
