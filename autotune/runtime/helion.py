"""A drop-in for ``@helion.kernel`` that runs the database's config: no autotuning in production.

Swap one decorator::

    from autotune.runtime import helion as tuned

    @tuned.kernel(kernel="helion_rms_norm", shape=lambda x, w, eps=1e-5: {"M": x.shape[0], "N": x.shape[1]},
                  static_shapes=True)                  # was: @helion.kernel(static_shapes=True)
    def rms_norm(x, w, eps=1e-5): ...                  # body and call sites unchanged

Helion's own dispatch runs every call (its prepared-call fast path: the drop-in adds one attribute test).
Its ``autotuner_fn`` hook, which Helion calls once per new specialization (shapes, dtypes, devices) that
has no config, is ours: ``shape(*args)`` names the call's shape in the kernel file's ``shape_params`` and
``autotune.best_config_match`` answers: the stored best of that shape (exact), else of the nearest tuned
shape (Helion repairs what does not fit), else Helion's default config for the bound inputs. Never
Helion's autotuner, in any path into it (``bind(args).autotune(...)`` too); under
``HELION_DISALLOW_AUTOTUNING=1``, which refuses even the hook, the drop-in sets the chosen config on the
bound kernel itself. A miss or nearest answer is asked again every ``RECHECK_S`` seconds and a new answer
set on its bound kernel, so a best tuned later (by ``autotune serve`` for the recorded miss) is used
without a restart; misses are recorded as ``best_config`` records them (``record=``, default
``AUTOTUNE_RECORD``).

Stored configs are ``autotune.kernel.helion``'s flat dicts (``block_sizes_0``...), as ``autotune search``
stores them for a ``HelionKernel``. The database never makes a call raise: a missing or broken database,
or a stored config Helion rejects, is the default config (logged once). Importing this module imports no
helion, torch, optuna, typer or alembic (the decorator imports helion, which the kernel's file has)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

log = logging.getLogger(__name__)

#: seconds before a specialization the database did not answer exactly is asked again
RECHECK_S = 5.0

ShapeOf = Callable[..., Mapping[str, int]] | Mapping[str, tuple[int, int]]


class _Choice:
    """What one bound kernel (one Helion specialization) runs, and where it came from."""

    __slots__ = ("bound", "config", "device", "shape", "source", "stored")

    def __init__(self, bound: Any, config: Any, source: str, stored: Any, shape: Any, device: str) -> None:
        self.bound = bound  # Helion's BoundKernel (kept: its id is the key)
        self.config = config  # the helion.Config it runs
        self.source = source  # exact, nearest (the database's) or default (Helion's)
        self.stored = stored  # the stored flat dict (None for the default)
        self.shape, self.device = shape, device  # the lookup's question, asked again at a recheck


class DatabaseHelionKernel:
    """A ``@helion.kernel`` whose config comes from the database. ``helion_kernel`` is the underlying
    Helion kernel (its own dispatch runs every call); ``choice(*args)`` says what a call runs and why;
    ``last_source`` / ``last_config`` are those of the last choice made."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        kernel: str,
        shape: ShapeOf,
        db: str | None = None,
        record: bool | str | None = None,
        helion_settings: Mapping[str, Any] | None = None,
    ) -> None:
        import helion

        settings = dict(helion_settings or {})
        if not isinstance(kernel, str) or not kernel.strip():
            raise ValueError("kernel(kernel=...): the stored kernel name must be a non-empty string")
        if {"config", "configs", "autotuner_fn"} & set(settings):
            raise ValueError(
                "kernel(...): the config comes from the database; no config=, configs= or autotuner_fn="
            )
        # effort "none" makes Helion take its default without asking autotuner_fn: the database would not be
        # asked. The effort is otherwise unused (autotuner_fn replaces Helion's search).
        settings.pop("autotune_effort", None)
        self.kernel, self.db, self.record = kernel, db, record
        self._shape_of = _shape_function(shape)
        self.helion_kernel = helion.kernel(fn, autotuner_fn=self._autotuner_fn, **settings)
        self._choices: dict[int, _Choice] = {}
        self._recheck_at = 0.0  # 0: every choice is final (exact); else when to ask the database again
        self.last_source: str | None = None
        self.last_config: Any = None
        self.__name__ = getattr(fn, "__name__", kernel)
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Helion's own dispatch (its prepared-call fast path) runs the call; what this adds per call is one
        # attribute test, and a clock read while some choice waits for a better answer.
        if self._recheck_at and time.monotonic() >= self._recheck_at:
            self._recheck()
        try:
            return self.helion_kernel(*args, **kwargs)
        except Exception as e:
            if type(e).__name__ != "AutotuningDisallowedInEnvironment":
                raise
        # HELION_DISALLOW_AUTOTUNING=1 refuses even our hook: set the chosen config on the bound kernel
        args = tuple(self.helion_kernel.normalize_args(*args, **kwargs))
        bound = self.helion_kernel.bind(args)
        bound.set_config(self._choose(bound, args).config)
        return bound(*args)

    def choice(self, *args: Any, **kwargs: Any) -> _Choice | None:
        """What a call with these arguments runs (None before its first call)."""
        args = tuple(self.helion_kernel.normalize_args(*args, **kwargs))
        return self._choices.get(id(self.helion_kernel.bind(args)))

    # ------------------------------------------------------------------ choosing (first call of a specialization)

    def _autotuner_fn(self, bound: Any, args: Sequence[Any], **_: Any) -> Any:
        """Helion's autotuner hook, called once per new specialization: the database's answer (or Helion's
        default config), never a search."""
        return _Answer(self._choose(bound, tuple(args)).config)

    def _choose(self, bound: Any, args: tuple[Any, ...]) -> _Choice:
        shape, device = self._shape(args), _device_of(args)
        stored, match = self._stored(shape, device)
        choice = self._compiled(bound, stored, match, shape, device) if stored else None
        if choice is None:
            config = bound.config_spec.default_config()
            choice = _Choice(bound, config, "default", None, shape, device)
        self._choices[id(bound)] = choice
        if choice.source != "exact" and shape is not None:
            self._recheck_at = self._recheck_at or time.monotonic() + RECHECK_S
        self.last_source, self.last_config = choice.source, choice.config
        return choice

    def _recheck(self) -> None:
        """Ask the database again for every choice that is not exact; a new answer is compiled and set on its
        bound kernel (Helion runs it from the next call)."""
        waiting = False
        for c in list(self._choices.values()):
            if c.source == "exact" or c.shape is None:
                continue
            stored, match = self._stored(c.shape, c.device)
            if stored and (stored != c.stored or match != c.source):
                new = self._compiled(c.bound, stored, match, c.shape, c.device)
                if new is not None:
                    c.bound.set_config(new.config)
                    self._choices[id(c.bound)] = c = new
                    self.last_source, self.last_config = new.source, new.config
            waiting = waiting or c.source != "exact"
        self._recheck_at = time.monotonic() + RECHECK_S if waiting else 0.0

    def _shape(self, args: tuple[Any, ...]) -> dict[str, int] | None:
        try:
            return {str(k): int(v) for k, v in self._shape_of(*args).items()}
        except Exception as e:
            _warn_once(("shape", self.kernel), f"kernel {self.kernel!r}: shape= failed ({e}); default config")
            return None

    def _stored(self, shape: dict[str, int] | None, device: str) -> tuple[dict[str, Any] | None, str]:
        """The stored flat dict for this shape and how it matched (exact, nearest, default)."""
        from autotune.runtime.lookup import best_config_match

        if shape is None:
            return None, "default"
        stored, match, _ = best_config_match(
            self.kernel, default=None, db=self.db, device=device, record=self.record, **shape
        )
        return (dict(stored), match) if isinstance(stored, Mapping) and stored else (None, "default")

    def _compiled(
        self, bound: Any, stored: dict[str, Any], match: str, shape: Any, device: str
    ) -> _Choice | None:
        """The stored config as Helion's for ``bound`` (compiled once, to fail here rather than in the
        caller's launch), or None (logged once) when Helion rejects it."""
        from autotune.kernel.helion import generation, helion_config

        try:
            config = helion_config(stored, generation(bound), strict=match == "exact")
            bound.compile_config(config, allow_print=False)
            return _Choice(bound, config, match, stored, shape, device)
        except Exception as e:
            _warn_once(
                ("config", self.kernel, repr(sorted(stored.items()))),
                f"the stored config {stored} of kernel {self.kernel!r} does not fit ({type(e).__name__}: "
                f"{str(e)[:200]}); Helion's default config instead",
            )
            return None

    def bind(self, args: tuple[Any, ...]) -> Any:
        return self.helion_kernel.bind(args)


class _Answer:
    """What Helion's ``autotuner_fn`` returns: an object whose ``autotune()`` gives the config."""

    def __init__(self, config: Any) -> None:
        self.config = config

    def autotune(self, *_: Any, **__: Any) -> Any:
        return self.config


def kernel(
    fn: Callable[..., Any] | None = None,
    *,
    kernel: str,
    shape: ShapeOf,
    db: str | None = None,
    record: bool | str | None = None,
    **helion_settings: Any,
) -> Any:
    """``@helion.kernel(**helion_settings)``, its config read from the database for ``kernel`` (the stored
    name). ``shape``: the call's shape in the kernel file's ``shape_params``, as a function of the call's
    arguments or as ``{"M": (arg, dim), ...}`` (``"K": (0, 1)``: the first argument's size 1). ``db``: a
    URL, SQLite path or exported JSON (default ``AUTOTUNE_DB``); ``record``: as ``best_config``'s."""

    def decorate(f: Callable[..., Any]) -> DatabaseHelionKernel:
        return DatabaseHelionKernel(
            f, kernel=kernel, shape=shape, db=db, record=record, helion_settings=helion_settings
        )

    return decorate(fn) if fn is not None else decorate


# ---------------------------------------------------------------------- helpers

_warned: set[tuple[str, ...]] = set()


def _warn_once(what: tuple[str, ...], message: str) -> None:
    if what not in _warned:
        _warned.add(what)
        log.warning("autotune: %s", message)


def _shape_function(shape: ShapeOf) -> Callable[..., Mapping[str, int]]:
    if callable(shape):
        return shape
    if isinstance(shape, Mapping) and shape:
        dims = {str(k): (int(a), int(d)) for k, (a, d) in shape.items()}
        return lambda *args: {k: args[a].shape[d] for k, (a, d) in dims.items()}
    raise ValueError('kernel(shape=...): a function of the arguments, or {"M": (arg, dim), ...}')


def _device_of(args: Sequence[Any]) -> str:
    for a in args:
        dev = getattr(a, "device", None)
        if dev is not None and hasattr(dev, "type"):
            return str(dev)
    return ""
