"""The :class:`Space`: a validated search space, its identity (``to_dict``/``hash``) and its configs.

Parsing lives in :mod:`autotune.space.params`, expressions in :mod:`autotune.space.expr`, the walks
(enumeration, size, sampling, ``find_valid``) in :mod:`autotune.space.walk` and files in
:mod:`autotune.space.load`; the package docstring describes the format.

Identity: :meth:`Space.hash` is the sha256 of the canonical JSON of the normalized definition (name,
params in order with their choices and ``when``, constraints with explicit names), expressions written
in canonical form (``ast.unparse``). YAML formatting, comments, spacing inside expressions, the
short/long spelling of a param and ``description`` do not change it; a choice, an order, a ``when`` or
a constraint does.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from autotune.errors import SpaceError
from autotune.space import walk
from autotune.space.expr import _EVAL_ERRORS, _describe

# Still imported from this module by autotune/cli (format_count, MAX_ENUMERATE) and autotune/search
# (Param), which other branches of the renovation rewrite: drop once they import from autotune.space.
from autotune.space.messages import _names, _short, format_count  # noqa: F401
from autotune.space.params import _NO, Constraint, Param, parse_definition
from autotune.space.walk import FIND_NODE_BUDGET, FIND_TIME_BUDGET_S, FIND_TRIES, MAX_ENUMERATE

FORMAT_VERSION = 1  # part of the hash: bump if the meaning of a normalized definition changes


class Space:
    """A validated search space. Build with :meth:`from_dict`, :meth:`from_yaml` or :func:`load_space`."""

    def __init__(
        self,
        name: str,
        params: Sequence[Param],
        constraints: Sequence[Constraint] = (),
        source: str = "<inline>",
        description: str | None = None,
    ):
        self.name, self.source, self.description = name, source, description
        self.params: list[Param] = list(params)
        self.constraints: list[Constraint] = list(constraints)
        self._index = {p.name: i for i, p in enumerate(self.params)}
        conditional = {p.name for p in self.params if p.when is not None}
        # Each constraint is checked as soon as the last param it uses is bound (its "stage"), which
        # prunes enumeration early; constraints on facts alone are checked once, up front.
        self._stage: list[list[Constraint]] = [[] for _ in self.params]
        self._fact_only: list[Constraint] = []
        for c in self.constraints:
            c._cond = tuple(sorted(c._params & conditional))
            if c._params:
                self._stage[max(self._index[p] for p in c._params)].append(c)
            else:
                self._fact_only.append(c)
        # Which device facts are needed, and by what (for the "missing fact" error); True: by a `when`.
        self._fact_users: dict[str, tuple[str, bool]] = {}
        for p in self.params:
            for f in sorted(p._when.facts if p._when else ()):
                self._fact_users.setdefault(f, (f"param {p.name} (when {_short(p.when, 200)})", True))
        for c in self.constraints:
            for f in sorted(c._expr.facts | (c._when.facts if c._when else frozenset())):
                self._fact_users.setdefault(f, (f"constraint {c.label}", False))

    # ---- construction

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "<inline>") -> Space:
        src = str(source)
        name, params, constraints, description = parse_definition(d, src)
        return cls(name, params, constraints, src, description)

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str]) -> Space:
        from autotune.space.load import load_space_dict  # load.py builds on this module

        return cls.from_dict(load_space_dict(path), source=str(path))

    # ---- identity

    def to_dict(self) -> dict[str, Any]:
        """The normalized definition (long forms only; JSON-serializable; ``from_dict`` accepts it)."""
        d: dict[str, Any] = {"name": self.name}
        if self.description is not None:
            d["description"] = self.description
        params: dict[str, Any] = {}
        for p in self.params:
            params[p.name] = {"values": list(p.choices)}
            if p.when is not None:
                params[p.name]["when"] = p.when
        d["params"] = params
        cons = []
        for c in self.constraints:
            item: dict[str, Any] = {"expr": c.expr}
            if c.named:
                item["name"] = c.name
            if c.when is not None:
                item["when"] = c.when
            cons.append(item)
        d["constraints"] = cons
        return d

    def _canonical(self) -> dict[str, Any]:
        # Params are a list (JSON objects are sorted below, and param order matters).
        return {
            "format": FORMAT_VERSION,
            "name": self.name,
            "params": [
                {"name": p.name, "values": list(p.choices), "when": p._when.canon if p._when else None}
                for p in self.params
            ],
            "constraints": [
                {
                    "expr": c._expr.canon,
                    "name": c.name if c.named else None,
                    "when": c._when.canon if c._when else None,
                }
                for c in self.constraints
            ],
        }

    def hash(self) -> str:
        text = json.dumps(self._canonical(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def __repr__(self) -> str:
        return f"Space({self.name!r}, params={[p.name for p in self.params]}, source={self.source!r})"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def param(self, name: str) -> Param:
        try:
            return self.params[self._index[name]]
        except KeyError:
            raise SpaceError(
                f"{self.source}: no param {_short(name)} (params: {_names(self.names)})"
            ) from None

    # ---- one config

    def _env(self, facts: Mapping[str, Any] | None, whens_only: bool = False) -> dict[str, Any]:
        """A fresh evaluation environment holding ``facts``; SpaceError if a needed fact is missing."""
        facts = facts or {}
        for f, (user, by_when) in self._fact_users.items():
            if f not in facts and (by_when or not whens_only):
                given = ", ".join(sorted(facts)) or "none"
                raise SpaceError(
                    f"{self.source}: {user} uses device fact {f!r}, which is missing (given: {given})"
                )
        return dict(facts)

    def normalize(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """Coerce JSON-ish values to the choices they stand for (0/1 -> bool for a bool param, 64.0 -> 64,
        numpy scalars; never "64" -> 64) and order keys as declared. Does not check activity or
        constraints (see :meth:`check`)."""
        if not isinstance(config, Mapping):
            raise SpaceError(f"{self.source}: a config must be a mapping (got {type(config).__name__})")
        for k in config:
            if k not in self._index:
                raise SpaceError(f"{self.source}: unknown param {_short(k)} (params: {_names(self.names)})")
        out: dict[str, Any] = {}
        for p in self.params:
            if p.name in config:
                v = p._match(config[p.name])
                if v is _NO:
                    raise SpaceError(
                        f"{self.source}: param {p.name}: {_short(config[p.name])} is not one of {_short(list(p.choices), 120)}"
                    )
                out[p.name] = v
        return out

    def check(self, config: Mapping[str, Any], facts: Mapping[str, Any] | None = None) -> list[str]:
        """Why ``config`` is not a valid point of this space (empty: valid). Values are judged as
        :meth:`normalize` would coerce them. Constraints are evaluated only when the config is
        structurally right (right keys, known choices), since they would fail noisily otherwise."""
        env = self._env(facts)
        if not isinstance(config, Mapping):
            return [f"a config must be a mapping (got {type(config).__name__})"]
        reasons = [f"unknown param {_short(k)}" for k in config if k not in self._index]
        cfg: dict[str, Any] = {}
        unknown: set[str] = set()  # params whose status cannot be judged (bad value upstream)
        for p in self.params:
            if p._when is not None and p._when.params & unknown:
                unknown.add(p.name)
                continue
            try:
                act = p._active(cfg, env)
            except _EVAL_ERRORS as exc:
                reasons.append(
                    f"param {p.name}: when {_short(p.when, 200)} cannot be evaluated: {_describe(exc)}"
                )
                unknown.add(p.name)
                continue
            given = p.name in config
            if act and not given:
                reasons.append(f"missing param {p.name}")
            elif given and not act:
                reasons.append(
                    f"param {p.name} is given but inactive (its when {_short(p.when, 200)} is false)"
                )
            elif given:
                v = p._match(config[p.name])
                if v is _NO:
                    reasons.append(
                        f"param {p.name}: {_short(config[p.name])} is not one of {_short(list(p.choices), 120)}"
                    )
                    unknown.add(p.name)
                else:
                    cfg[p.name] = env[p.name] = v
        if reasons:
            return reasons
        return [r for c in self.constraints if (r := c._violation(cfg, env))]

    def is_valid(self, config: Mapping[str, Any], facts: Mapping[str, Any] | None = None) -> bool:
        return not self.check(config, facts)

    def neighbours(
        self, config: Mapping[str, Any], facts: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """The valid configs one move from ``config``: one param set to an adjacent choice (choices are
        ordered: 2 < 3 < 4 stages, 64 < 128 tiles; a string param's choices have no order, so every other
        one). A param that a move makes active takes its first choice; one it makes inactive is dropped.
        What a local search tries next, and what the stopping rule checks before it calls a best final."""
        env0 = self._env(facts)
        config = self.normalize(config)
        out: list[dict[str, Any]] = []
        seen: set[tuple[tuple[str, Any], ...]] = {tuple(config.items())}
        for p in self.params:
            if p.name not in config:
                continue
            i = p.choices.index(config[p.name])
            if isinstance(config[p.name], str):
                moves = [c for c in p.choices if c != config[p.name]]
            else:
                moves = [p.choices[j] for j in (i - 1, i + 1) if 0 <= j < len(p.choices)]
            for v in moves:
                cand = self._complete({**config, p.name: v}, env0)
                key = tuple(cand.items()) if cand is not None else None
                if key is not None and key not in seen and not self.check(cand, facts):
                    seen.add(key)
                    out.append(cand)
        return out

    def _complete(self, config: Mapping[str, Any], env0: Mapping[str, Any]) -> dict[str, Any] | None:
        """``config`` with exactly its active params (newly active ones at their first choice); None when
        a ``when`` cannot be evaluated."""
        env, out = dict(env0), {}
        for p in self.params:
            try:
                if not p._active(out, env):
                    continue
            except _EVAL_ERRORS:
                return None
            v = config.get(p.name, _NO)
            out[p.name] = env[p.name] = p.choices[0] if v is _NO else v
        return out

    # ---- all configs (see autotune.space.walk)

    def enumerate(
        self, facts: Mapping[str, Any] | None = None, limit: int | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every valid config, in a deterministic order (the product in declaration order), lazily.

        With ``limit`` (e.g. ``MAX_ENUMERATE``), raises SpaceError up front when the space has more than
        ``limit`` combinations before constraints (so ``list(space.enumerate(facts, limit=...))`` is
        bounded); without it, iterating a huge space may take forever (take a prefix with islice)."""
        return walk.enumerate_valid(self, facts, limit)

    def count(self, facts: Mapping[str, Any] | None = None, limit: int | None = MAX_ENUMERATE) -> int:
        """How many valid configs there are (by enumerating them). Raises SpaceError, at once, when the
        space has more than ``limit`` combinations before constraints (``None``: no limit)."""
        return walk.count_valid(self, facts, limit)

    def enumerable(self, facts: Mapping[str, Any] | None = None, limit: int = MAX_ENUMERATE) -> bool:
        """Whether the space is small enough (at most ``limit`` combinations before constraints) to
        enumerate: what :meth:`count` and ``enumerate(limit=...)`` accept. Larger spaces: sample them."""
        return self.size_unconstrained(facts) <= limit

    def size_unconstrained(self, facts: Mapping[str, Any] | None = None) -> int:
        """Configs before constraints (inactive params do not multiply): exact, or, for conditionals too
        entangled to count in ``SIZE_STEP_BUDGET`` steps, an upper bound (see :meth:`size_info`).
        ``facts`` are needed only if a ``when`` uses one. Never enumerates."""
        return self.size_info(facts)[0]

    def size_info(self, facts: Mapping[str, Any] | None = None) -> tuple[int, bool]:
        """``(size, exact)``: the number of configs before constraints and whether it is exact.

        A product over params; where a ``when`` reads earlier params, the count branches on those params
        only and is memoized on the values the remaining ``when``\\s can still read, so a chain or a
        tree of conditionals costs time linear in the params. If that state space is too big (more than
        ``SIZE_STEP_BUDGET`` steps), the result is the product of all choice counts, an upper bound
        (``exact`` False). Time is bounded either way."""
        return walk.size_info(self, facts)

    def sample(
        self, rng: random.Random, facts: Mapping[str, Any] | None = None, max_tries: int = 10000
    ) -> dict[str, Any]:
        """A random valid config: each active param drawn uniformly, rejected on the first violated
        constraint (uniform over valid configs when there are no conditionals). Never builds the product:
        each try costs one pass over the params. SpaceError after ``max_tries`` failed tries."""
        return walk.sample(self, rng, facts, max_tries)

    def sample_unique(
        self,
        rng: random.Random,
        n: int,
        facts: Mapping[str, Any] | None = None,
        exclude: Iterable[str] = (),
        max_tries: int | None = None,
    ) -> list[dict[str, Any]]:
        """Up to ``n`` distinct random valid configs whose ``autotune.trial.config_hash`` is not in
        ``exclude`` (e.g. the configs already evaluated), by rejection sampling. Makes at most
        ``max_tries`` tries (default ``100 * n + 10000``) and returns fewer configs when they run out
        (a small or nearly exhausted space); never raises for that, and never builds the product."""
        return walk.sample_unique(self, rng, n, facts, exclude, max_tries)

    def find_valid(
        self,
        facts: Mapping[str, Any] | None = None,
        *,
        node_budget: int = FIND_NODE_BUDGET,
        tries: int = FIND_TRIES,
        time_budget_s: float = FIND_TIME_BUDGET_S,
        rng: random.Random | None = None,
    ) -> dict[str, Any]:
        """A valid config, found in bounded time, or SpaceError saying there is none (or none was found).

        Whatever the size of the space: (1) a constraint on facts alone that is false, or a param (not
        conditional) none of whose choices passes the constraints on it alone, proves there is none;
        (2) a depth-first walk in declaration order with pruning, for up to ``node_budget`` choices
        tried, finds the first valid config in :meth:`enumerate` order, or proves there is none if it
        completes; (3) then up to ``tries`` random tries (``rng``: default seeded, deterministic).
        All within about ``time_budget_s`` seconds; the error says which of these ran."""
        return walk.find_valid(
            self, facts, node_budget=node_budget, tries=tries, time_budget_s=time_budget_s, rng=rng
        )
