"""What a running search shows on stderr: rich's live bar per shape on a terminal; otherwise (a pipe, a log
file, CI) one plain line per finished trial and one per shape, as Kernel Tuner and
``TRITON_PRINT_AUTOTUNING`` users expect. ``quiet`` shows neither; ``verbose`` adds each failure's whole
error (and, on a terminal, the per-trial lines above the bar).

Fed by the search loop's ``TrialEvent`` hook (``autotune search`` and ``autotune nightly`` alike); rich is
imported only when a bar is drawn."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from autotune.shapes import format_shape
from autotune.trial import fmt_config, fmt_time

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from autotune.shapes import Shape
    from autotune.tuning.report import ShapeReport, TrialEvent

Mode = Literal["bar", "lines", "quiet"]

#: a failure's error is cut to this many characters on its trial line (``--verbose``: whole)
_ERROR_CHARS = 120


def choose_mode(console: Console, *, quiet: bool = False, verbose: bool = False, bar: bool = True) -> Mode:
    """``quiet`` wins; a terminal gets the bar (unless ``bar`` is False: a job's log wants lines); anything
    else gets lines."""
    if quiet:
        return "quiet"
    return "bar" if bar and console.is_terminal else "lines"


def trial_line(ev: TrialEvent, *, verbose: bool = False, exact: bool = True) -> str:
    """One finished trial: shape, count, status, time, config, best so far (and why it failed). ``exact``:
    the budget is a count (``--trials``); under the stopping rule it is only a ceiling, so no "/N"."""
    res = ev.result
    time_text = fmt_time(res.time_s) if res.timed else "-"
    best = fmt_time(ev.best.time_s) if ev.best is not None else "-"
    count = f"{ev.evaluations}/{ev.budget}" if exact else str(ev.evaluations)
    line = (
        f"[{format_shape(ev.shape)}] trial {count} {res.status.value} {time_text} "
        f"{fmt_config(res.config)}; best so far {best}"
    )
    if res.error and not res.timed:
        error = " ".join(res.error.split())
        if not verbose and len(error) > _ERROR_CHARS:
            error = error[: _ERROR_CHARS - 3] + "..."
        line += f" ({error})"
    if verbose and res.compile_s is not None:
        calls = f", {res.calls} timed calls" if res.calls else ""  # fewer than --num-tests: raced
        line += f" [compile {res.compile_s:.2f} s{f', {res.device}' if res.device else ''}{calls}]"
    return line


def shape_line(report: ShapeReport) -> str:
    """One finished shape: evaluations, the declared best (the table's figure) and the wall time."""
    r = report
    if r.best is not None:
        best = f"best {fmt_time(r.best.time_s)} {fmt_config(r.best.config)}"
        if r.unreliable:
            best += f" (unreliable: spread ±{(r.best_spread or 0) * 100:.0f}%)"
    else:
        best = "no ok config"
    reused = f" (+{r.reused} reused)" if r.reused else ""
    return f"[{r.shape_key}] done: {r.evaluations} evaluated{reused}; {best}; {r.wall_s:.1f} s"


class SearchProgress:
    """The display of one command's searches. Use as a context manager around them; ``on_event`` is the
    search loop's hook; ``start_shape``/``finish_shape`` bracket each shape."""

    def __init__(self, console: Console, mode: Mode, *, verbose: bool = False):
        self.console = console
        self.mode = mode
        self.verbose = verbose
        self._bar: Progress | None = None
        self._tasks: dict[str, TaskID] = {}
        #: the budget is a count (``--trials``), not the stopping rule's ceiling
        self._exact = True

    def __enter__(self) -> SearchProgress:
        if self.mode == "bar":
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[best]}"),
                console=self.console,
                transient=False,
            )
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def say(self, line: str) -> None:
        """A plain line (never rich markup: configs hold brackets), above the bar when there is one."""
        if self.mode != "quiet":
            self.console.print(line, highlight=False, markup=False, soft_wrap=True)

    def start_shape(self, shape: Shape, budget: int | None) -> None:
        """``budget``: ``--trials`` (None: the stopping rule decides, so the bar has no total)."""
        self._exact = budget is not None
        if self._bar is not None:
            key = format_shape(shape)
            self._tasks[key] = self._bar.add_task(key, total=budget, best="")

    def on_event(self, ev: TrialEvent) -> None:
        if self.mode == "lines" or (self.mode == "bar" and self.verbose):
            self.say(trial_line(ev, verbose=self.verbose, exact=self._exact))
        task = self._tasks.get(format_shape(ev.shape))
        if self._bar is not None and task is not None:
            best = f"best so far {fmt_time(ev.best.time_s)}" if ev.best else ""
            total = ev.budget if self._exact else None
            self._bar.update(task, completed=ev.evaluations, total=total, best=best)

    def finish_shape(self, report: ShapeReport) -> None:
        """The shape's end: the bar shows the declared best (the re-timed median the table prints, not the
        fastest single measurement seen while searching); a line says the same."""
        task = self._tasks.get(report.shape_key)
        if self._bar is not None and task is not None:
            best = f"best {fmt_time(report.best.time_s)}" if report.best else "no ok config"
            total = max(report.evaluations, 1)
            self._bar.update(task, completed=report.evaluations, total=total, best=best)
        if self.mode == "lines":
            self.say(shape_line(report))
