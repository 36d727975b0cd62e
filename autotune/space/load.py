"""Space files: reading YAML safely (:func:`load_yaml_file`, which the nightly job loader shares, and
:func:`load_space_dict`), where a space named ``<name>`` is looked for (:func:`default_space_dirs`) and
loading one (:func:`load_space`).

A YAML file is at most ``MAX_FILE_BYTES``, nested at most ``MAX_YAML_DEPTH`` deep, at most
``MAX_YAML_NODES`` nodes once aliases are expanded (an "alias bomb" is refused in milliseconds), with no
recursive aliases and no duplicate keys.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from autotune import settings
from autotune.errors import AutotuneError, SpaceError
from autotune.space.messages import _clip, _short
from autotune.space.space import Space

MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_YAML_DEPTH = 64  # nesting of YAML collections, aliases expanded
MAX_YAML_NODES = 1_000_000  # YAML nodes once aliases are expanded (an alias bomb expands to billions)


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML keeps the last one silently: a param would vanish),
    nesting deeper than ``MAX_YAML_DEPTH``, recursive aliases, and documents of more than
    ``MAX_YAML_NODES`` nodes once aliases are expanded (an alias bomb), all before constructing."""

    def __init__(self, stream: Any):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        # PyYAML composes recursively: a 5,000-deep list would be a RecursionError without this.
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested more than {MAX_YAML_DEPTH} levels deep", self.peek_event().start_mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> yaml.Node:
        node = super().compose_document()
        _check_expansion(node)
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                dup = key in seen
                seen.add(key)
            except TypeError:  # unhashable key: SafeLoader reports it
                continue
            if dup:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"duplicate key {_short(key)}",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a composed document whose aliases expand to more than ``MAX_YAML_NODES`` nodes or
    ``MAX_YAML_DEPTH`` levels, or loop. Iterative and memoized: linear in the composed nodes."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        nid = id(node)
        if done:
            kids = _children(node)
            size[nid] = 1 + sum(size[id(k)] for k in kids)
            depth[nid] = 1 + max((depth[id(k)] for k in kids), default=0)
            open_.discard(nid)
            problem = None
            if size[nid] > MAX_YAML_NODES:
                problem = f"more than {MAX_YAML_NODES:,} nodes once aliases are expanded (an alias bomb?)"
            elif depth[nid] > MAX_YAML_DEPTH:
                problem = f"nested more than {MAX_YAML_DEPTH} levels deep once aliases are expanded"
            if problem:
                raise yaml.composer.ComposerError(None, None, problem, node.start_mark)
            continue
        if nid in size:
            continue
        if nid in open_:
            raise yaml.composer.ComposerError(None, None, "an alias refers to itself", node.start_mark)
        open_.add(nid)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node) if id(k) not in size)


def load_yaml_file(path: str | os.PathLike[str], what: str, error: type[AutotuneError]) -> Any:
    """Read and parse a YAML file under this module's limits (size, UTF-8, nesting, nodes once aliases are
    expanded, recursive aliases, duplicate keys): the parsed document, of any type. Every failure is one
    ``error`` line naming the file (and the line, when known); ``what`` names the kind of file in it (the
    space loader and the nightly job loader share this: either file may come from anyone)."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise error(f"{p}: larger than {MAX_FILE_BYTES:,} bytes; not a {what}")
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise error(f"{p}: no such {what}") from None
    except IsADirectoryError:
        raise error(f"{p}: is a directory, not a {what}") from None
    except UnicodeDecodeError as exc:
        raise error(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise error(f"{p}: cannot read: {exc.strerror or exc}") from None
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark else ""
        raise error(f"{p}{line}: YAML error: {_clip(str(exc.problem or exc.context))}") from None
    except yaml.YAMLError as exc:
        raise error(f"{p}: YAML error: {_clip(str(exc))}") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # e.g. an integer of over 4300 digits
        raise error(f"{p}: YAML error: {type(exc).__name__}: {_clip(str(exc))}") from None


def load_space_dict(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and YAML-parse a space file; the raw mapping (validate it with :meth:`Space.from_dict`)."""
    data = load_yaml_file(path, "search-space file", SpaceError)
    if not isinstance(data, dict):
        got = "an empty file" if data is None else f"a {type(data).__name__}"
        raise SpaceError(f"{Path(path)}: a search space must be a YAML mapping (got {got})")
    return data


def default_space_dirs(near: str | os.PathLike[str] | None = None) -> list[Path]:
    """Where a space named ``<name>`` is looked for, in order (the one resolver, for kernel files and
    :func:`load_space` alike): $AUTOTUNE_SPACES_DIR; with ``near`` (a kernel file), the search_spaces folder
    beside it and beside its folder; ./search_spaces; the search_spaces folder next to this package."""
    extra = settings.spaces_dir()
    dirs = [Path(extra)] if extra else []
    if near is not None:
        folder = Path(near).parent
        dirs += [folder / "search_spaces", folder.parent / "search_spaces"]
    dirs += [Path.cwd() / "search_spaces", Path(__file__).resolve().parents[2] / "search_spaces"]
    return list(dict.fromkeys(dirs))


def load_space(
    path_or_name: str | os.PathLike[str], dirs: Sequence[str | os.PathLike[str]] | None = None
) -> Space:
    """A space from a YAML path, or by name from ``dirs`` (default :func:`default_space_dirs`)."""
    text = str(path_or_name)
    if (
        isinstance(path_or_name, os.PathLike)
        or text.endswith((".yaml", ".yml"))
        or "/" in text
        or os.sep in text
    ):
        return Space.from_yaml(text)
    candidates = [Path(d) / f"{text}.yaml" for d in (dirs if dirs is not None else default_space_dirs())]
    for c in candidates:
        if c.is_file():
            return Space.from_yaml(c)
    raise SpaceError(
        f"search space {_short(text)} not found (looked in {', '.join(str(c) for c in candidates)})"
    )
