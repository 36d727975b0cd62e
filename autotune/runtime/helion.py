"""A drop-in for ``@helion.kernel`` that runs the database's config: no autotuning in production.

Swap one decorator::

    from autotune.runtime import helion as tuned

    @tuned.kernel(kernel="helion_rms_norm", shape=lambda x, w, eps=1e-5: {"M": x.shape[0], "N": x.shape[1]},
                  static_shapes=True)                  # was: @helion.kernel(static_shapes=True)
    def rms_norm(x, w, eps=1e-5): ...                  # body and call sites unchanged

On the first call for a specialization (Helion's own ``specialization_key``: shapes, dtypes, devices),
``shape(*args)`` names the call's shape in the kernel file's ``shape_params`` and
``autotune.best_config_match`` answers: the stored best of that shape (exact), else of the nearest tuned
shape (Helion repairs what does not fit), else Helion's default config for the bound inputs. Never
Helion's autotuner: the kernel is also given an ``autotuner_fn`` that answers from the database, so a
path into Helion's autotuning (``bind(args).autotune(...)``) gets the same answer. The chosen config is
compiled once (``BoundKernel.compile_config``) and later calls run the compiled function directly: a
dict hit per call. A miss or nearest answer is asked again every ``RECHECK_S`` seconds, so a best tuned
later (by ``autotune serve`` for the recorded miss) is used without a restart; misses are recorded as
``best_config`` records them (``record=``, default ``AUTOTUNE_RECORD``).

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
    __slots__ = ("compiled", "config", "recheck_at", "source", "stored")

    def __init__(self, compiled: Any, config: Any, source: str, stored: Any, recheck_at: float) -> None:
        self.compiled = compiled  # Helion's compiled function for this specialization
        self.config = config  # the helion.Config it runs
        self.source = source  # exact, nearest (the database's) or default (Helion's)
        self.stored = stored  # the stored flat dict (None for the default)
        self.recheck_at = recheck_at  # 0: final


class DatabaseHelionKernel:
    """A ``@helion.kernel`` whose config comes from the database. ``helion_kernel`` is the underlying
    Helion kernel; ``last_source`` / ``last_config`` say what the last call ran."""

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

        if not isinstance(kernel, str) or not kernel.strip():
            raise ValueError("kernel(kernel=...): the stored kernel name must be a non-empty string")
        if "config" in (helion_settings or {}) or "configs" in (helion_settings or {}):
            raise ValueError("kernel(...): the config comes from the database; give no config= or configs=")
        self.kernel, self.db, self.record = kernel, db, record
        self._shape_of = _shape_function(shape)
        self.helion_kernel = helion.kernel(fn, autotuner_fn=self._autotuner_fn, **dict(helion_settings or {}))
        self._spec_key = self.helion_kernel.specialization_key
        self._chosen: dict[Any, _Choice] = {}
        self.last_source: str | None = None
        self.last_config: Any = None
        self.__name__ = getattr(fn, "__name__", kernel)
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:  # by name: Helion's own normalization to positional arguments (defaults filled in)
            args = tuple(self.helion_kernel.normalize_args(*args, **kwargs))
        key = self._spec_key(args)
        choice = self._chosen.get(key)
        if choice is None or (choice.recheck_at and time.monotonic() >= choice.recheck_at):
            choice = self._choose(key, args, choice)
        self.last_source = choice.source
        return choice.compiled(*args)

    # ------------------------------------------------------------------ choosing (first call of a key)

    def _choose(self, key: Any, args: tuple[Any, ...], previous: _Choice | None) -> _Choice:
        bound = self.helion_kernel.bind(args)
        stored, match = self._stored(args)
        recheck = 0.0 if match == "exact" else time.monotonic() + RECHECK_S
        if previous is not None and stored == previous.stored:
            previous.recheck_at = recheck  # the same answer: keep what is compiled
            return previous
        choice = None
        if stored:
            choice = self._compiled(bound, stored, match, recheck)
        if choice is None:
            config = bound.config_spec.default_config()
            choice = _Choice(
                bound.compile_config(config, allow_print=False), config, "default", None, recheck
            )
        self._chosen[key] = choice
        self.last_config = choice.config
        return choice

    def _stored(self, args: tuple[Any, ...]) -> tuple[dict[str, Any] | None, str]:
        """The stored flat dict for this call's shape and how it matched (exact, nearest, default)."""
        from autotune.runtime.lookup import best_config_match

        try:
            shape = {str(k): int(v) for k, v in self._shape_of(*args).items()}
        except Exception as e:
            _warn_once(("shape", self.kernel), f"kernel {self.kernel!r}: shape= failed ({e}); default config")
            return None, "default"
        stored, match, _ = best_config_match(
            self.kernel, default=None, db=self.db, device=_device_of(args), record=self.record, **shape
        )
        return (dict(stored), match) if isinstance(stored, Mapping) and stored else (None, "default")

    def _compiled(self, bound: Any, stored: dict[str, Any], match: str, recheck: float) -> _Choice | None:
        """The stored config compiled for ``bound``, or None (logged once) when Helion rejects it."""
        from autotune.kernel.helion import generation, helion_config

        try:
            config = helion_config(stored, generation(bound), strict=match == "exact")
            return _Choice(bound.compile_config(config, allow_print=False), config, match, stored, recheck)
        except Exception as e:
            _warn_once(
                ("config", self.kernel, repr(sorted(stored.items()))),
                f"the stored config {stored} of kernel {self.kernel!r} does not fit ({type(e).__name__}: "
                f"{str(e)[:200]}); Helion's default config instead",
            )
            return None

    def _autotuner_fn(self, bound: Any, args: Sequence[Any], **_: Any) -> Any:
        """Helion's autotuner hook: the database's answer (or the default), never a search."""
        return _Answer(self, bound, tuple(args))

    def bind(self, args: tuple[Any, ...]) -> Any:
        return self.helion_kernel.bind(args)


class _Answer:
    """What Helion's ``autotuner_fn`` must return: an object whose ``autotune()`` gives a config."""

    def __init__(self, owner: DatabaseHelionKernel, bound: Any, args: tuple[Any, ...]) -> None:
        self.owner, self.bound, self.args = owner, bound, args

    def autotune(self, *_: Any, **__: Any) -> Any:
        stored, match = self.owner._stored(self.args)
        choice = self.owner._compiled(self.bound, stored, match, 0.0) if stored else None
        return choice.config if choice is not None else self.bound.config_spec.default_config()


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
