"""Walking a space's configs, in bounded time: enumeration, counting, the size before constraints,
random sampling and :func:`find_valid`. The :class:`~autotune.space.space.Space` methods of the same
names call these.

Every walk checks each constraint as soon as the last param it uses is bound (``Space._stage``), so
enumeration prunes early; constraints on device facts alone (``Space._fact_only``) are checked once.
Limits (so that no space, however large or hostile, can hang): ``MAX_ENUMERATE`` combinations before
constraints for ``count``/``enumerate(limit=...)``, ``SIZE_STEP_BUDGET`` steps for an exact size, and
``FIND_NODE_BUDGET`` / ``FIND_TRIES`` / ``FIND_TIME_BUDGET_S`` for ``find_valid``.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterable, Iterator, Mapping
from itertools import repeat
from typing import TYPE_CHECKING, Any

from autotune.errors import SpaceError
from autotune.space.expr import _EVAL_ERRORS
from autotune.space.messages import _clip, format_count
from autotune.space.params import _NO

if TYPE_CHECKING:
    from autotune.space.space import Space

#: combinations (before constraints) that count() / enumerate(limit=...) walk; larger spaces are sampled
MAX_ENUMERATE = 1_000_000
SIZE_STEP_BUDGET = 100_000  # steps size_unconstrained spends counting conditionals exactly, then bounds
FIND_NODE_BUDGET = 200_000  # choices find_valid tries in order (depth first) before random tries
FIND_TRIES = 20_000  # random tries find_valid makes after that
FIND_TIME_BUDGET_S = 10.0  # find_valid's overall time limit


class _OutOfBudget(Exception):
    """A bounded walk or count ran out of steps or time."""


class _Budget:
    """Steps (and optionally a deadline, checked every 1024 steps) for a bounded walk or count."""

    __slots__ = ("left", "used", "deadline")

    def __init__(self, steps: int, deadline: float | None = None):
        self.left, self.used, self.deadline = steps, 0, deadline

    def step(self) -> None:
        if self.left <= 0 or (
            self.deadline is not None and not self.used & 1023 and time.monotonic() > self.deadline
        ):
            raise _OutOfBudget
        self.left -= 1
        self.used += 1

    def each(self, items: Iterable[Any]) -> Iterator[Any]:
        """``items``, one step each."""
        for item in items:
            self.step()
            yield item


# --------------------------------------------------------------------------------------------------
# enumeration


def walk(
    space: Space, env: dict[str, Any], build: bool, budget: _Budget | None = None
) -> Iterator[dict[str, Any] | None]:
    """Depth-first product in declaration order, pruning with each constraint at its stage. With a
    ``budget``, each choice tried is one step and ``_OutOfBudget`` ends the walk."""
    params, stage, n = space.params, space._stage, len(space.params)
    cfg: dict[str, Any] = {}
    if not all(c._ok(cfg, env) for c in space._fact_only):
        return

    def rec(i: int) -> Iterator[dict[str, Any] | None]:
        p, last = params[i], i == n - 1
        try:
            act = p._active(cfg, env)
        except _EVAL_ERRORS:
            return  # a when that cannot be evaluated makes every completion invalid
        if not act:
            # every constraint staged here uses p, which is absent: all skipped
            if last:
                yield dict(cfg) if build else None
            else:
                yield from rec(i + 1)
            return
        name, checks = p.name, stage[i]
        for v in p.choices if budget is None else budget.each(p.choices):
            cfg[name] = env[name] = v
            for c in checks:
                if not c._ok(cfg, env):
                    break
            else:
                if last:
                    yield dict(cfg) if build else None
                else:
                    yield from rec(i + 1)
        # Removing the key keeps later keys inserted after this one: dicts come out in declared order.
        del cfg[name], env[name]

    yield from rec(0)


def _refuse_if_large(space: Space, facts: Mapping[str, Any] | None, limit: int | None, what: str) -> None:
    if limit is None:
        return
    size, exact = size_info(space, facts)
    if size > limit:
        raise SpaceError(
            f"{space.source}: {what}: the space has {'' if exact else 'up to '}{format_count(size)} "
            f"combinations before constraints, more than the limit of {format_count(limit)} "
            "(autotune.space.MAX_ENUMERATE); sample it instead"
        )


def enumerate_valid(
    space: Space, facts: Mapping[str, Any] | None, limit: int | None
) -> Iterator[dict[str, Any]]:
    """Every valid config, lazily; the size check (with ``limit``) happens now, not when iterated."""
    env = space._env(facts)
    _refuse_if_large(space, facts, limit, "cannot enumerate")
    return walk(space, env, build=True)  # type: ignore[return-value]


def count_valid(space: Space, facts: Mapping[str, Any] | None, limit: int | None) -> int:
    env = space._env(facts)
    _refuse_if_large(space, facts, limit, "too large to count exactly")
    return sum(1 for _ in walk(space, env, build=False))


# --------------------------------------------------------------------------------------------------
# size before constraints


def size_info(space: Space, facts: Mapping[str, Any] | None) -> tuple[int, bool]:
    """``(size, exact)``: see :meth:`Space.size_info`."""
    env = space._env(facts, whens_only=True)
    params, n = space.params, len(space.params)
    bound = math.prod(len(p.choices) for p in params)
    if all(p._when is None for p in params):
        return bound, True
    live = _live_reads(space)
    memo: list[dict[tuple[Any, ...], int]] = [{} for _ in range(n)]
    budget = _Budget(SIZE_STEP_BUDGET)
    cfg: dict[str, Any] = {}

    def rec(i: int) -> int:
        if i == n:
            return 1
        budget.step()
        vals = tuple(map(cfg.get, live[i], repeat(_NO)))
        key = (vals, tuple(map(type, vals)))  # types: 1 and True are equal keys, not the same choice
        hit = memo[i].get(key)
        if hit is not None:
            return hit
        p = params[i]
        try:
            act = p._active(cfg, env)
        except _EVAL_ERRORS:
            total = 0
        else:
            if not act:
                total = rec(i + 1)
            elif p.name not in live[i + 1]:
                total = len(p.choices) * rec(i + 1)
            else:
                total = 0
                for v in p.choices:
                    cfg[p.name] = env[p.name] = v
                    total += rec(i + 1)
                del cfg[p.name], env[p.name]
        memo[i][key] = total
        return total

    try:
        return rec(0), True
    except _OutOfBudget:
        return bound, False


def _live_reads(space: Space) -> list[tuple[str, ...]]:
    """``live[i]``: the params declared before i that a ``when`` at i or later reads (the count's state
    at step i)."""
    params, n = space.params, len(space.params)
    live: list[tuple[str, ...]] = [()] * (n + 1)
    reads: set[str] = set()
    for i in range(n - 1, -1, -1):
        if params[i]._when is not None:
            reads |= params[i]._when.params
        live[i] = tuple(sorted(x for x in reads if space._index[x] < i))
    return live


# --------------------------------------------------------------------------------------------------
# sampling


def draw(space: Space, rng: random.Random, env0: Mapping[str, Any]) -> dict[str, Any] | None:
    """One rejection-sampling try: each active param drawn uniformly; None on a violated constraint."""
    env: dict[str, Any] = dict(env0)
    cfg: dict[str, Any] = {}
    for i, p in enumerate(space.params):
        try:
            if not p._active(cfg, env):
                continue
        except _EVAL_ERRORS:
            return None
        cfg[p.name] = env[p.name] = rng.choice(p.choices)
        for c in space._stage[i]:
            if not c._ok(cfg, env):
                return None
    return cfg


def sample(
    space: Space, rng: random.Random, facts: Mapping[str, Any] | None, max_tries: int
) -> dict[str, Any]:
    env0 = space._env(facts)
    if all(c._ok({}, env0) for c in space._fact_only):
        for _ in range(max_tries):
            cfg = draw(space, rng, env0)
            if cfg is not None:
                return cfg
    raise SpaceError(
        f"{space.source}: no valid config found in {max_tries} random tries "
        "(find_valid() looks harder, in bounded time; count() says how many valid configs a small "
        "space has)"
    )


def sample_unique(
    space: Space,
    rng: random.Random,
    n: int,
    facts: Mapping[str, Any] | None,
    exclude: Iterable[str],
    max_tries: int | None,
) -> list[dict[str, Any]]:
    from autotune.trial import config_hash

    env0 = space._env(facts)
    seen = set(exclude)
    out: list[dict[str, Any]] = []
    if n <= 0 or not all(c._ok({}, env0) for c in space._fact_only):
        return out
    for _ in range(100 * n + 10000 if max_tries is None else max_tries):
        cfg = draw(space, rng, env0)
        if cfg is None:
            continue
        h = config_hash(cfg)
        if h not in seen:
            seen.add(h)
            out.append(cfg)
            if len(out) >= n:
                break
    return out


# --------------------------------------------------------------------------------------------------
# find_valid: cheap proofs of "none", then a pruned walk in order, then random tries


def find_valid(
    space: Space,
    facts: Mapping[str, Any] | None,
    *,
    node_budget: int,
    tries: int,
    time_budget_s: float,
    rng: random.Random | None,
) -> dict[str, Any]:
    """A valid config, or SpaceError: see :meth:`Space.find_valid`."""
    env = space._env(facts)
    _refute_by_facts(space, env)
    started = time.monotonic()
    deadline = started + time_budget_s
    _refute_by_single_params(space, env, _Budget(node_budget, deadline))
    budget = _Budget(node_budget, deadline)
    cfg = _first_in_order(space, env, facts, budget)
    if cfg is not None:
        return cfg
    visited = budget.used
    rng = rng if rng is not None else random.Random(0)
    cfg, done = _random_tries(space, env, rng, tries, started, time_budget_s)
    if cfg is not None:
        return cfg
    raise SpaceError(
        f"{space.source}: no valid config found in {time.monotonic() - started:.1f} s "
        f"({format_count(visited)} choices tried in order, {format_count(done)} random tries); "
        "the constraints are probably unsatisfiable on these facts"
    )


def _refute_by_facts(space: Space, env: Mapping[str, Any]) -> None:
    """SpaceError if a constraint on device facts alone is false."""
    for c in space._fact_only:
        if not c._ok({}, env):
            raise SpaceError(f"{space.source}: no valid config: {c._violation({}, env)}")


def _refute_by_single_params(space: Space, env: Mapping[str, Any], proof: _Budget) -> None:
    """SpaceError if a param (not conditional) has no choice that passes the constraints on it alone.
    A proof that is cheap when params have few choices; skipped (not failed) past the budget."""
    try:
        for i, p in enumerate(space.params):
            alone = [c for c in space._stage[i] if c._params == {p.name}]
            if p._when is not None or not alone:
                continue
            for v in p.choices:
                proof.step()
                if all(c._ok({p.name: v}, {**env, p.name: v}) for c in alone):
                    break
            else:
                names = _clip("; ".join(c.label for c in alone))
                raise SpaceError(
                    f"{space.source}: no valid config: no choice of param {p.name} satisfies {names}"
                )
    except _OutOfBudget:
        pass


def _first_in_order(
    space: Space, env: Mapping[str, Any], facts: Mapping[str, Any] | None, budget: _Budget
) -> dict[str, Any] | None:
    """The first valid config in enumeration order; None if the budget ran out first; SpaceError if
    the walk completed (a proof that there is none)."""
    try:
        for cfg in walk(space, dict(env), build=True, budget=budget):
            return cfg
    except _OutOfBudget:
        return None
    size, exact = size_info(space, facts)
    every = f"all {format_count(size)} combinations violate" if exact else "every combination violates"
    raise SpaceError(f"{space.source}: no valid config: {every} a constraint")


def _random_tries(
    space: Space,
    env: Mapping[str, Any],
    rng: random.Random,
    tries: int,
    started: float,
    time_budget_s: float,
) -> tuple[dict[str, Any] | None, int]:
    """Up to ``tries`` random draws while time is left: (a valid config or None, tries made)."""
    done = 0
    while done < tries and time.monotonic() - started < time_budget_s:
        for _ in range(min(256, tries - done)):
            done += 1
            cfg = draw(space, rng, env)
            if cfg is not None:
                return cfg, done
    return None, done
