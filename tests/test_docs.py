"""The documentation (README.md, docs/*.md, data/README.md): every relative link resolves, to a file and to a
heading; every page of docs/ is linked from the README; every Python block parses; the README's first screen
stays short, shows its two set-up commands with the venv activated and names only real commands;
docs/benchmarks.md documents exactly the benchmarks of bench/; and the examples of docs/extending.md marked
``<!-- doctest: ... -->`` run as written.

Markers: ``<!-- doctest: write NAME -->`` before a Python block writes it to NAME in the example's folder;
``<!-- doctest: run -->`` runs the block there as a script (after every ``write`` block of the page), and
``<!-- doctest: run needs=MODULE:ATTR -->`` only once MODULE has ATTR (an API the page is written against
before it lands: the example is skipped until then, and runs, and must pass, from then on)."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS, ROOT / "data" / "README.md"]

_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
_CODE_SPAN = re.compile(r"`[^`]+`")
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
_PY_BLOCK = re.compile(r"^```python\n(.*?)^```[ \t]*$", re.M | re.S)
_DOCTEST = re.compile(
    r"^<!-- doctest: (?:write (?P<name>\S+)|run(?: needs=(?P<needs>\S+))?) -->\n```python\n(?P<code>.*?)^```",
    re.M | re.S,
)


def _prose(text: str) -> str:
    """The page without its code blocks and code spans (a link in code is not a link)."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (letters, digits, ``_`` and ``-``
    kept), spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a Markdown page (a repeated heading gets -1, -2... as on GitHub)."""
    seen: dict[str, int] = {}
    out = set()
    for m in _HEADING.finditer(_FENCE.sub("", page.read_text())):
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def relative_links(page: Path) -> list[str]:
    return [t for t in _LINK.findall(_prose(page.read_text())) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def resolve(page: Path, target: str) -> tuple[Path, str]:
    path, _, anchor = target.partition("#")
    return ((page.parent / path).resolve() if path else page), anchor


#: the pages the README promises (issue 18; benchmarks.md: issue 42)
EXPECTED = [
    "benchmarks",
    "contract",
    "spaces",
    "strategies",
    "runtime",
    "fleets",
    "nightly",
    "database",
    "settings",
    "internals",
    "extending",
]


def test_the_docs_exist():
    assert {f"{name}.md" for name in EXPECTED} <= {p.name for p in DOCS}


# ---------------------------------------------------------------- the README's first screen (issue 42)


def test_the_readme_starts_short():
    """A newcomer's page: at most 150 lines, and at most 250 words before the first section (what it does and
    why, not figures)."""
    text = README.read_text()
    assert len(text.splitlines()) <= 150
    assert len(text[: text.index("\n## ")].split()) <= 250


def _shell_lines(page: Path) -> list[str]:
    blocks = re.findall(r"^```(?:bash|sh)\n(.*?)^```", page.read_text(), re.M | re.S)
    return [line.split("#")[0].strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_the_readme_shows_its_two_set_up_commands_with_the_venv_activated():
    """The main job and CI's test command as the README gives them, and the venv activated before any bare
    ``autotune`` command (else: ``autotune: command not found``)."""
    lines = _shell_lines(README)
    assert "bash .ci/setup && bash .ci/test" in README.read_text()
    main_job = "autotune search examples/matmul_cpu.py --device cpu --trials 20"
    assert any(line.startswith(main_job) for line in lines)
    activate = next(i for i, line in enumerate(lines) if line == ". .venv/bin/activate")
    first_bare = next(i for i, line in enumerate(lines) if line.startswith("autotune "))
    assert activate < first_bare


def test_every_autotune_command_the_readme_shows_exists():
    import typer

    from autotune.cli import app

    group = typer.main.get_command(app)
    known = set(group.commands)  # type: ignore[attr-defined]
    shown = {line.split()[1] for line in _shell_lines(README) if line.startswith("autotune ")}
    assert shown and shown <= known, shown - known


def test_benchmarks_page_documents_every_benchmark_and_names_no_other():
    """docs/benchmarks.md (at most 400 lines) shows ``python -m bench NAME`` for each module of the suite, and
    every NAME it shows is one."""
    sys.path.insert(0, str(ROOT))
    from bench.__main__ import benchmarks

    page = (ROOT / "docs" / "benchmarks.md").read_text()
    assert len(page.splitlines()) <= 400
    named = set(re.findall(r"python3? -m bench ([a-z_0-9]+)", page))
    suite = set(benchmarks())
    assert named <= suite, named - suite
    assert {b for b in suite if f"`{b}`" not in page and b not in named} == set()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page):
    broken = []
    for target in relative_links(page):
        path, anchor = resolve(page, target)
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no heading #{anchor} in {path.name}")
    assert not broken, broken


def test_every_docs_page_is_linked_from_the_readme():
    linked = {resolve(README, t)[0] for t in relative_links(README)}
    assert not [p.name for p in DOCS if p.resolve() not in linked]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_python_block_parses(page):
    for i, block in enumerate(_PY_BLOCK.findall(page.read_text())):
        compile(block, f"{page.name} python block {i + 1}", "exec")


# ---------------------------------------------------------------- docs/extending.md's examples


@dataclass(frozen=True)
class Example:
    line: int
    code: str
    needs: str | None


def _examples(page: Path) -> tuple[dict[str, str], list[Example]]:
    text = page.read_text()
    files: dict[str, str] = {}
    runs: list[Example] = []
    for m in _DOCTEST.finditer(text):
        if m.group("name"):
            files[m.group("name")] = m.group("code")
        else:
            runs.append(Example(text.count("\n", 0, m.start()) + 1, m.group("code"), m.group("needs")))
    return files, runs


EXTENDING = ROOT / "docs" / "extending.md"
FILES, RUNS = _examples(EXTENDING)


def _available(needs: str) -> bool:
    module, _, attrs = needs.partition(":")
    obj: object = importlib.import_module(module)
    for attr in attrs.split(".") if attrs else ():
        if not hasattr(obj, attr):
            return False
        obj = getattr(obj, attr)
    return True


def test_extending_has_examples_to_run():
    assert FILES and len(RUNS) >= 3


@pytest.mark.slow
@pytest.mark.parametrize("example", RUNS, ids=lambda e: f"extending.md:{e.line}")
def test_extending_example_runs(example, tmp_path):
    if example.needs and not _available(example.needs):
        pytest.skip(f"written against {example.needs}, not in this tree yet")
    for name, code in FILES.items():
        (tmp_path / name).write_text(code)
    script = tmp_path / f"example_{example.line}.py"
    script.write_text(example.code)
    env = {k: v for k, v in os.environ.items() if k != "AUTOTUNE_DB"}
    env["AUTOTUNE_HOME"] = str(tmp_path)  # nothing lands in the user's default database
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tmp_path), str(ROOT), env.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [sys.executable, script.name], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, f"extending.md line {example.line}:\n{proc.stdout}\n{proc.stderr}"
