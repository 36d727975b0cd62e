"""``python -m bench NAME [args]``: run one benchmark; without a name, list them.

A benchmark is a module ``bench/NAME.py`` with ``main(argv) -> int``; the first paragraph of its docstring is
its summary here. Modules are found, not listed, so adding one is adding its file (``common`` is the shared
helper, not a benchmark)."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOT_BENCHMARKS = {"__init__", "__main__", "common"}


def benchmarks() -> dict[str, str]:
    """Every benchmark's name and summary, read without importing it (some import torch or triton)."""
    found = {}
    for path in sorted(HERE.glob("*.py")):
        if path.stem in NOT_BENCHMARKS or path.stem.startswith("_"):
            continue
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        summary = " ".join(doc.split("\n\n")[0].split())
        found[path.stem] = summary if len(summary) <= 110 else summary[:109].rstrip() + "…"
    return found


def usage() -> str:
    found = benchmarks()
    width = max(map(len, found), default=0)
    lines = [
        "usage: python -m bench NAME [--out DIR] [args]   (NAME --help: its arguments)",
        "",
        "benchmarks:",
    ]
    lines += [f"  {name:{width}}  {summary}" for name, summary in found.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in benchmarks():
        print(f"no benchmark {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"bench.{name}")
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
