"""The tools around a search: for a kernel file (``check``, ``space``, ``bench``) and for strategies offline
(``replay`` on recorded landscapes, ``landscape export`` to record one). Three sub-apps, so that
``autotune --help`` keeps listing the commands in the order of a user's work."""

from __future__ import annotations

import json
import logging
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperCommand

from autotune.cli.common import DbOption, ShapesOption, err, fail, fmt_config, opt_help, out
from autotune.errors import SettingsError
from autotune.files import check_writable, write_text
from autotune.plain_table import PlainTable as Table
from autotune.trial import fmt_time

if TYPE_CHECKING:
    from autotune.space.space import Space

kernel_app = typer.Typer()
replay_app = typer.Typer()
landscape_app = typer.Typer(
    no_args_is_help=True, help="Landscape files: every config of a space measured on a shape."
)


@kernel_app.command()
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
        fail(f"{file}: {failed} conformance check(s) failed")


@kernel_app.command()
def space(
    path: Annotated[
        Path | None, typer.Argument(help="A search_spaces/*.yaml file, or a kernel file (its space)")
    ] = None,
    facts: Annotated[
        str | None,
        typer.Option(
            help=opt_help("Device facts: h200, h100, cuda (this GPU) or cpu", default="this machine's")
        ),
    ] = None,
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
    from autotune.space.space import Space

    if from_triton:
        path = _space_from_triton(from_triton, out_path, product)
        if path is None:
            return
    elif path is None:
        raise SettingsError("give a space file (FILE.yaml), or --from-triton FILE.py:NAME")
    sp = _kernel_file_space(path) if path.suffix == ".py" else Space.from_yaml(path)
    label, fact_values = _device_facts(facts)
    summary = _count_configs(sp, fact_values, label, show_configs)
    out.print(
        f"{sp.name}: {len(sp.params)} params, {summary}; hash {sp.hash()[:16]}",
        highlight=False,
        soft_wrap=True,
    )


def _kernel_file_space(path: Path) -> Any:
    """The space a kernel file declares or derives (a HelionKernel's, from Helion's ConfigSpec), read in a
    child process as `--from-triton` reads a list."""
    from autotune.kernel.contract import space_of_file
    from autotune.kernel.isolated import run_isolated
    from autotune.settings import SearchSettings
    from autotune.space.space import Space

    space_def, source = run_isolated(
        space_of_file,
        str(path),
        path=str(path),
        doing="deriving the kernel file's space",
        timeout_s=SearchSettings().start_timeout_s,
        timeout_hint="AUTOTUNE_START_TIMEOUT",
    )
    return Space.from_dict(space_def, source=source)


def _space_from_triton(spec: str, out_path: Path | None, product: bool) -> Path | None:
    """The space of a ``triton.Config`` list as YAML: on stdout (None), or written to ``out_path`` (returned,
    to be checked as any space file)."""
    from functools import partial

    from autotune.kernel.isolated import run_isolated
    from autotune.settings import SearchSettings
    from autotune.space.triton import dump_yaml, space_from_file

    if out_path is not None:
        check_writable(out_path)  # before the kernel file is imported
    # the file's top level runs in a child: an os._exit() or a hang there must not end or hang the CLI
    space = run_isolated(
        partial(space_from_file, product=product),
        spec,
        path=spec.rpartition(":")[0] or spec,
        doing="reading the triton.Config list",
        timeout_s=SearchSettings().start_timeout_s,
        timeout_hint="AUTOTUNE_START_TIMEOUT",
    )
    text = dump_yaml(space)
    if out_path is None:
        typer.echo(text, nl=False)
        return None
    return write_text(out_path, text)


def _device_facts(facts: str | None) -> tuple[str, dict[str, Any]]:
    """(what the facts are of, the facts): a preset, this machine's GPU (``cuda``) or CPU, or by default
    this machine's device (its GPU when it has one, else its CPU: an H200's facts on a laptop would
    count configs that machine cannot run)."""
    from autotune.env import DEVICE_PRESETS, device_facts

    if facts in DEVICE_PRESETS:
        return facts, DEVICE_PRESETS[facts]
    if facts not in (None, "cpu", "cuda"):
        raise SettingsError(
            f"unknown device facts {facts!r}: choose cpu, cuda or {', '.join(DEVICE_PRESETS)}"
        )
    if facts != "cpu":
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(), device_facts("cuda")
        if facts == "cuda":
            raise SettingsError("--facts cuda: this machine has no CUDA device")
    return "cpu", device_facts("cpu")


def _count_configs(sp: Space, fact_values: dict[str, Any], facts: str, show_configs: int) -> str:
    """How many configs of ``sp`` are valid on the device (printing the first ``show_configs``); exactly when
    the space is small enough to enumerate, else after a bounded check that one exists."""
    import random

    from autotune.errors import SpaceError
    from autotune.space.space import MAX_ENUMERATE, format_count

    size, exact = sp.size_info(fact_values)
    combos = f"{'' if exact else 'at most '}{format_count(size)} combinations"
    if size > MAX_ENUMERATE:
        sp.find_valid(fact_values)  # SpaceError (exit 2) in bounded time when there is none
        for cfg in sp.sample_unique(random.Random(0), show_configs, fact_values):
            out.print(fmt_config(cfg), highlight=False)
        return (
            f"too large to count exactly: {combos} (limit {MAX_ENUMERATE:,}); searched by sampling; "
            f"has valid configs on {facts}"
        )
    n = 0
    for cfg in sp.enumerate(fact_values):
        if n < show_configs:
            out.print(fmt_config(cfg), highlight=False)
        n += 1
    if n == 0:
        every = f"all {combos} violate" if exact else "every combination violates"
        raise SpaceError(f"{sp.source}: no valid config on {facts}: {every} a constraint")
    return f"{combos}, {n:,} valid on {facts}"


@kernel_app.command()
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
    from autotune.shapes import parse_shapes

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
    statuses = _bench_rows(table, file, shapes, cfg, device, num_tests)
    out.print(table)
    failed = [s for s in statuses if s != "ok"]
    if failed:  # a script timing a config must not read a timeout as a measurement
        fail(
            f"{file}: the config did not run ok on {len(failed)} of {len(statuses)} shape(s) ({', '.join(failed)})"
        )


def _bench_rows(
    table: Table,
    file: Path,
    shapes: list[dict[str, int]] | None,
    cfg: dict[str, Any] | None,
    device: str | None,
    num_tests: int,
) -> list[str]:
    """Time ``cfg`` (None: the kernel's default) on each shape in one worker, a table row each; the status
    of each."""
    from autotune.engine import EvalOptions, Worker
    from autotune.settings import SearchSettings

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
        statuses = []
        for s in targets:
            r = worker.evaluate(cfg, s)
            statuses.append(r.status.value)
            table.add_row(
                format_shape(s),
                fmt_config(cfg),
                r.status.value,
                fmt_time(r.time_s),
                f"{r.tflops:.3g}" if r.tflops else "-",
                f"{r.gbps:.3g}" if r.gbps else "-",
                f"{r.spread:.1%}" if r.spread is not None else (r.error or "")[:60],
            )
    return statuses


@landscape_app.command("export")
def landscape_export(
    kernel: Annotated[str, typer.Argument(help="Kernel name")],
    shape: Annotated[str, typer.Option("--shape", help="The shape, e.g. M=64,N=2112,K=7168")],
    out: Annotated[Path, typer.Option("--out", help="File to write")],
    device: Annotated[str | None, typer.Option(help="GPU model (default: the newest key's)")] = None,
    db: DbOption = None,
) -> None:
    """Write the search trials of a key as a landscape file (the format `autotune replay` reads)."""
    from autotune.shapes import format_shape, parse_shape
    from autotune.store import Store
    from autotune.tuning.landscape import export_landscape

    check_writable(out)
    store = Store.open(db, create=False, readonly=True)
    land = export_landscape(store, kernel, format_shape(parse_shape(shape)), device)
    write_text(out, json.dumps(land.to_json(), indent=1))
    typer.echo(f"wrote {out}: {len(land.results)} configs of {kernel} {land.shape_key} on {land.device_name}")


class _ReplayCommand(TyperCommand):
    """``--preload A B C``: every argument after ``--preload`` up to the next option is a preload file
    (a click option takes one value, so ``B`` and ``C`` would silently become targets)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        out: list[str] = []
        greedy = False
        for a in args:
            if a == "--preload":
                greedy = True
                continue
            if a.startswith("-"):
                greedy = False
            out.extend(["--preload", a] if greedy else [a])
        return super().parse_args(ctx, out)


#: replay's options for what the store holds and how a strategy runs (here: the command stays one screen)
_StrategiesOption = Annotated[
    str,
    typer.Option(help="Strategies, comma-separated; NAME@D: with D proposals in flight (tpe@1: sequential)"),
]
_PreloadOption = Annotated[
    list[Path] | None,
    typer.Option(help="More landscapes put in the store as training data (--preload A B ..., last option)"),
]
_HistoryEvaluationsOption = Annotated[
    int,
    typer.Option(
        help="Each history landscape enters as an N-evaluation search of it (auto, empty store), not a "
        "sweep: a realistic store (0: sweeps)"
    ),
]


_ReplayTrialsOption = Annotated[
    int | None,
    typer.Option(
        "--trials",
        help="New evaluations per search, as search's --trials (default: the stopping rule decides)",
    ),
]
_ReplayEvaluationsOption = Annotated[
    int | None, typer.Option("--evaluations", hidden=True, help="Deprecated: --trials")
]
_BudgetsOption = Annotated[
    str | None,
    typer.Option(help="Budgets to report, comma-separated (default 10,20,TRIALS or 10,20,40,80)"),
]


@replay_app.command(cls=_ReplayCommand)
def replay(
    landscapes: Annotated[list[Path], typer.Argument(help="Landscape files (one shape each)")],
    strategy: _StrategiesOption = "auto,tpe",
    trials: _ReplayTrialsOption = None,
    evaluations: _ReplayEvaluationsOption = None,
    budgets: _BudgetsOption = None,
    seeds: Annotated[int, typer.Option(help="Seeds per shape and strategy")] = 10,
    transfer: Annotated[
        bool,
        typer.Option(
            help="Other landscapes of the same kernel in the store: other shapes, and the target's shape on "
            "other devices (leave-one-shape-out, leave-one-device-out)"
        ),
    ] = True,
    preload: _PreloadOption = None,
    history_evaluations: _HistoryEvaluationsOption = 0,
    kernel: Annotated[
        Path | None, typer.Option(help="Kernel file: its features() hook feeds the auto strategy")
    ] = None,
    depth: Annotated[int, typer.Option(help="Proposals in flight (the H200 pipeline's: 19)")] = 19,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write every run as JSON")] = None,
) -> None:
    """Replay strategies offline on recorded landscapes: regret per shape, budget and seed."""
    from autotune.tuning import replay as rp
    from autotune.tuning.landscape import load_landscape

    names = _strategies(strategy)
    if evaluations is not None:  # the budget's old name here; one name everywhere now
        err.print("warning: --evaluations is deprecated: use --trials", highlight=False)
        trials = evaluations
    if (trials is not None and trials < 1) or seeds < 1 or depth < 1 or history_evaluations < 0:
        raise SettingsError(
            "--trials, --seeds and --depth must be at least 1, --history-evaluations at least 0"
        )
    report_at = _budgets(budgets, trials)
    targets = [load_landscape(p) for p in landscapes]
    extra = [load_landscape(p) for p in preload or ()]
    logging.getLogger("autotune").setLevel(logging.WARNING)
    with rp.kernel_features(str(kernel)) if kernel else nullcontext() as feats:
        runs = rp.replay(
            targets,
            names,
            trials,
            range(seeds),
            transfer=transfer,
            preload=extra,
            features_for=feats,
            depth=depth,
            history_evaluations=history_evaluations,
        )
    for line in rp.format_table(runs, report_at):
        typer.echo(line)
    if json_out:
        write_text(json_out, json.dumps([r.__dict__ for r in runs], indent=1), "--json")


def _strategies(text: str) -> list[str]:
    """``--strategy a,b@1``, each name known to the registry (``@D``: its proposals in flight)."""
    from autotune.search import strategy_names
    from autotune.tuning.replay import strategy_depth

    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [n for n in names if strategy_depth(n, 1)[0] not in strategy_names()]
    if bad or not names:
        raise SettingsError(f"--strategy {text!r}: choose from {', '.join(strategy_names())}")
    return names


def _budgets(text: str | None, trials: int | None) -> list[int]:
    """The budgets to report regret at: ``--budgets`` (default 10, 20 and ``trials``; with the stopping
    rule 10, 20, 40, 80: a run stopped earlier counts its final best), within range."""
    default = {10, 20, trials} if trials is not None else {10, 20, 40, 80}
    try:
        report_at = sorted({int(b) for b in text.split(",")}) if text else sorted(default)
    except ValueError:
        raise SettingsError(f"--budgets {text!r}: comma-separated integers") from None
    return [b for b in report_at if 1 <= b <= (trials or b)]
