"""The package's layout, pinned (DESIGN.md): which part may import which, the "never" rules, no function
over 60 lines, and the public import paths kernel files and users write.

Read from the source (AST), so these checks import nothing of the package except where a public import is
the point. A part (a unit) is a subpackage of autotune/ (space, kernel, engine, search, store, tuning,
runtime, jobs, service, cli) or the ground floor: every other top-level module (errors, settings, records, trial,
shapes, devices, env, bench, ...) except the facades that re-export (the package itself, __main__ and the
wave-2 import paths)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "autotune"

#: the pipeline's floors: a unit imports only from lower floors (the ground floor is 0)
FLOOR = {
    "ground": 0,
    "space": 1,
    "kernel": 2,
    "engine": 3,
    "search": 3,  # beside the engine: neither knows the other (a strategy never touches a device)
    "store": 4,
    "tuning": 5,
    "runtime": 6,
    "jobs": 6,
    # `autotune serve`: it drives the tuning loop for requests and runs the nightly job (`--job`) on its warm
    # workers (DESIGN.md: tuning/service.py)
    "service": 7,
    "cli": 8,
}
#: top-level modules that only re-export (or start the CLI): exempt from the floors
FACADES = {
    "autotune",
    "autotune.__main__",
    "autotune.triton_autotune",
    "autotune.triton_kernel",
    "autotune.conformance",
}
#: imports up a floor that exist today, each inside a function (so never a cycle at import time):
#: (from unit, to unit) -> why. (engine -> tuning, the simulated backend reading tuning/landscape.py, is gone
#: once DESIGN's one Landscape lives in engine/: the search-loop branch does that.)
UPWARD_TODAY = {
    ("space", "kernel"): "space --from-triton imports a kernel file to read its triton.Config list",
    ("kernel", "engine"): "the conformance check names a worker's signal like the worker does",
}
MAX_FUNCTION_LINES = 60


@dataclass(frozen=True)
class Import:
    importer: str  # module name, e.g. autotune.runtime.lookup
    imported: str  # the module imported, e.g. autotune.store.urls (or a third-party module)
    line: int
    in_function: bool  # inside a def: runs when called, not at import time
    type_only: bool  # under `if TYPE_CHECKING:`: never runs

    def where(self) -> str:
        return f"{self.importer}:{self.line} imports {self.imported}"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_package_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (ROOT / rel).with_suffix(".py").is_file() or (ROOT / rel / "__init__.py").is_file()


class _Visitor(ast.NodeVisitor):
    def __init__(self, module: str, is_init: bool) -> None:
        self.module, self.is_init = module, is_init
        self.found: list[Import] = []
        self.depth = 0  # functions entered
        self.type_only = 0  # TYPE_CHECKING blocks entered

    def visit_FunctionDef(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        checking = (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        )
        self.type_only += checking
        for child in node.body:
            self.visit(child)
        self.type_only -= checking
        for child in node.orelse:
            self.visit(child)

    def add(self, name: str, line: int) -> None:
        self.found.append(Import(self.module, name, line, self.depth > 0, self.type_only > 0))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            package = self.module.split(".")
            if not self.is_init:
                package = package[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join(package + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            # `from autotune.store import urls` imports the module autotune.store.urls
            self.add(sub if base.startswith("autotune") and is_package_module(sub) else base, node.lineno)


@cache
def imports() -> tuple[Import, ...]:
    found: list[Import] = []
    for path in sorted(PKG.rglob("*.py")):
        visitor = _Visitor(module_name(path), path.name == "__init__.py")
        visitor.visit(ast.parse(path.read_text(), str(path)))
        found.extend(visitor.found)
    return tuple(found)


def unit(module: str) -> str | None:
    """The part ``module`` belongs to: a subpackage's name, "ground", or None (a facade, or not ours)."""
    parts = module.split(".")
    if parts[0] != "autotune" or module in FACADES:
        return None
    if len(parts) > 1 and parts[1] in FLOOR:
        return parts[1]
    return "ground"


def imports_of(prefix: str) -> list[Import]:
    """Every import made by the modules under ``prefix`` (a package or one module)."""
    return [i for i in imports() if i.importer == prefix or i.importer.startswith(prefix + ".")]


def reaching(found: list[Import], *targets: str) -> list[str]:
    return [
        i.where() for i in found if any(i.imported == t or i.imported.startswith(t + ".") for t in targets)
    ]


# ---------------------------------------------------------------- the scanner itself


def test_the_scanner_sees_the_package():
    names = {i.importer for i in imports()}
    assert {"autotune.runtime.lookup", "autotune.engine.worker", "autotune.settings"} <= names
    lookup = imports_of("autotune.runtime.lookup")
    assert any(i.imported == "autotune.store.urls" and i.in_function for i in lookup), lookup
    assert unit("autotune.store.trials") == "store" and unit("autotune.errors") == "ground"
    assert unit("autotune.triton_kernel") is None and unit("optuna") is None


# ---------------------------------------------------------------- the "never" rules


def test_runtime_never_reaches_the_tuner_engine_cli_search_or_jobs():
    found = imports_of("autotune.runtime")
    bad = reaching(
        found, "autotune.tuning", "autotune.engine", "autotune.cli", "autotune.search", "autotune.jobs"
    )
    assert not bad, bad


def test_runtime_imports_no_optuna_typer_or_alembic_at_import_time():
    loaded = [i for i in imports_of("autotune.runtime") if not i.in_function and not i.type_only]
    bad = reaching(loaded, "optuna", "typer", "alembic")
    assert not bad, bad


def test_the_engine_never_touches_the_store():
    bad = reaching(imports_of("autotune.engine"), "autotune.store")
    assert not bad, bad


def test_strategies_never_touch_a_device_or_the_users_kernel_file():
    bad = reaching(
        imports_of("autotune.search"), "autotune.engine.worker", "autotune.kernel", "torch", "triton"
    )
    assert not bad, bad


def test_settings_never_import_the_strategies():
    bad = reaching(imports_of("autotune.settings"), "autotune.search")
    assert not bad, bad


# ---------------------------------------------------------------- the floors


def test_each_part_imports_only_from_the_floors_below():
    """Down the pipeline only (the ground floor imports no subpackage); the few imports up a floor that
    exist today are pinned, each inside a function. Imports for type checking only never run: a part may
    type against an interface above it (the store's Protocols)."""
    bad = []
    for i in imports():
        src, dst = unit(i.importer), unit(i.imported)
        if src is None or dst is None or src == dst or FLOOR[dst] < FLOOR[src] or i.type_only:
            continue
        if (src, dst) in UPWARD_TODAY and i.in_function:
            continue
        bad.append(f"{i.where()} ({src} -> {dst}: floor {FLOOR[src]} -> {FLOOR[dst]})")
    assert not bad, "\n".join(bad)


def test_no_import_cycle_between_parts_at_import_time():
    graph: dict[str, set[str]] = {}
    for i in imports():
        src, dst = unit(i.importer), unit(i.imported)
        if src and dst and src != dst and not i.in_function and not i.type_only:
            graph.setdefault(src, set()).add(dst)

    def cycle_from(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        for nxt in sorted(graph.get(node, ())):
            if found := cycle_from(nxt, [*path, node]):
                return found
        return None

    cycles = {frozenset(c): c for start in sorted(graph) if (c := cycle_from(start, []))}
    assert not cycles, " ; ".join(" -> ".join(c) for c in cycles.values())


def test_pinned_upward_imports_still_exist():
    """An exception that no longer happens is taken out of UPWARD_TODAY (the pin only ever shrinks)."""
    seen = {(unit(i.importer), unit(i.imported)) for i in imports()}
    gone = [pair for pair in UPWARD_TODAY if pair not in seen]
    assert not gone, f"remove from UPWARD_TODAY: {gone}"


# ---------------------------------------------------------------- function length


def test_no_function_over_60_lines():
    """Counted from the def line to the last line, inclusive (split by step, not by line count)."""
    long = []
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {n} lines")
    assert not long, "\n".join(long)


# ---------------------------------------------------------------- public imports


def test_public_names_of_the_package():
    import autotune
    from autotune import bench, kernel, space
    from autotune.runtime import lookup

    assert autotune.best_config is lookup.best_config
    assert autotune.bench_kineto is bench.bench_kineto
    assert autotune.bench_kineto_detailed is bench.bench_kineto_detailed
    assert autotune.BenchResult is bench.BenchResult
    assert autotune.Kernel is kernel.Kernel and autotune.TunableKernel is kernel.TunableKernel
    assert autotune.Space is space.Space
    assert set(autotune.__all__) >= {
        "best_config", "bench_kineto", "bench_kineto_detailed", "BenchResult", "Kernel", "TunableKernel", "Space"
    }  # fmt: skip


def test_kernel_file_imports():
    from autotune.conformance import assert_conforms
    from autotune.kernel import Kernel, compare_outputs
    from autotune.triton_kernel import TritonKernel

    assert issubclass(TritonKernel, Kernel)
    assert callable(compare_outputs) and callable(assert_conforms)


@pytest.mark.triton
def test_the_triton_drop_in_import():
    from autotune.triton_autotune import autotune

    assert callable(autotune)


def test_the_console_entry_point():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"autotune": "autotune.cli:main"}
    from autotune.cli import main

    assert callable(main)


def test_import_autotune_stays_light():
    heavy = ("optuna", "typer", "alembic", "torch", "sqlalchemy", "triton")
    code = (
        "import sys\n"
        "import autotune\n"
        f"first = [m for m in {heavy!r} if m in sys.modules]\n"
        "autotune.best_config\n"
        f"then = [m for m in {heavy!r} if m in sys.modules]\n"
        "print(first, then)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["[]", "[]"], proc.stdout


def test_a_search_handed_to_a_service_imports_no_search_loop():
    """What ``autotune search`` imports to hand its shapes to a live service (the CLI, the store, the client,
    the progress display and the report records) leaves out the search loop, the engine, the strategies and
    Alembic: on the GPU hosts each of them costs part of the seconds a handed-over search should take."""
    heavy = (
        "autotune.tuning.shape_search",
        "autotune.engine",
        "autotune.search",
        "alembic",
        "optuna",
        "numpy",
    )
    code = (
        "import sys\n"
        "import autotune.cli, autotune.store, autotune.service.client, autotune.tuning.progress\n"
        f"print([m for m in {heavy!r} if m in sys.modules])\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["[]"], proc.stdout


@pytest.mark.parametrize("strategy", ["random", "auto"])
def test_the_strategy_preload_imports_optuna_only_under_the_import_lock(strategy):
    """The tuner's preload thread imports the strategy's modules, Optuna among them, while another thread
    creates a new database's Optuna tables: every such import holds ``imports.LOCK`` (unlocked, the registry's
    look-up raced the other and a search died with ``KeyError: 'optuna.study'``). While the lock is held
    elsewhere, the preload imports nothing; released, it imports the strategy."""
    code = (
        "import sys, time\n"
        "from autotune import imports\n"
        "from autotune.tuning.tuner import _preload_strategy\n"
        "assert 'optuna' not in sys.modules\n"
        "with imports.LOCK:\n"
        f"    t = _preload_strategy({strategy!r})\n"
        "    time.sleep(1.0)\n"
        "    during = 'optuna' in sys.modules\n"
        "t.join(120)\n"
        "print(during, 'optuna' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True"], proc.stdout
