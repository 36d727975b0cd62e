"""The ``autotune`` command line (typer + rich): one module per command group, mounted here.

Holds no logic a library user would also need: it parses, calls the library, and turns every
``AutotuneError`` into one line on stderr and exit code 2 (``NotFoundError``: exit code 1); that edge is
:class:`_Commands`, so no command handles errors itself."""

from __future__ import annotations

import faulthandler
import logging
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from autotune.cli import db, inspect, jobs, search, serve, tools
from autotune.cli.common import check_strategy, err, fail, mask_secrets, say_error
from autotune.errors import AutotuneError, NotFoundError

__all__ = ["app", "main", "mask_secrets"]


class _Commands(TyperGroup):
    """The CLI's edge: a domain error from any command becomes one line and an exit code."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except NotFoundError as exc:
            fail(str(exc), code=1)
        except AutotuneError as exc:
            fail(str(exc))
        except KeyboardInterrupt:
            fail("interrupted; every finished trial is stored, run the same command to resume", code=130)
        except BrokenPipeError as exc:
            if _stdout_gone():
                raise  # `autotune trials ... | head`: typer's quiet exit 1 is right
            # a pipe to a child of ours: typer would exit 1 without a word (seen once in CI); say it
            raise RuntimeError(f"a pipe to a child process broke: {exc}") from exc


def _stdout_gone() -> bool:
    """Whether stdout is a pipe nobody reads any more (poll flags POLLERR on such a write end)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


app = typer.Typer(
    cls=_Commands,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Find the fastest correct config of a GPU kernel and keep it in a database.",
)


def _print_version(value: bool) -> None:
    if value:
        from autotune import __version__

        typer.echo(f"autotune {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit"),
    ] = False,
) -> None:
    """Find the fastest correct config of a GPU kernel and keep it in a database."""


# in the order `autotune --help` lists them: the workflow, the kernel-file tools, the jobs, then the groups
app.add_typer(search.app)  # search
app.add_typer(inspect.app)  # best, show, trials, export
app.add_typer(tools.kernel_app)  # check, space, bench
app.add_typer(jobs.app)  # nightly, report
app.add_typer(tools.replay_app)  # replay
app.add_typer(serve.app)  # serve, request
app.add_typer(db.app, name="db")
app.add_typer(tools.landscape_app, name="landscape")


def _check_environment() -> None:
    """A bad AUTOTUNE_* value: one line, exit 2, before anything runs."""
    from autotune.settings import check_environment

    try:
        check_strategy(check_environment().strategy)
    except AutotuneError as exc:
        say_error(str(exc))
        sys.exit(2)


def main() -> None:
    # A fatal signal (SIGBUS from a mapped file truncated under the process, SIGSEGV) ended the process
    # with no line said (issue 45): Python's fault handler names the signal and the stack on stderr.
    faulthandler.enable()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        _check_environment()
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
