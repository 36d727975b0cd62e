"""A drop-in for ``@triton.autotune`` that reads the tuned config from the database.

Swap one decorator::

    from autotune.runtime.triton_autotune import autotune

    @autotune(configs=CONFIGS, key=["n_rows", "n_cols"], kernel="softmax")   # was: @triton.autotune(...)
    @triton.jit
    def softmax_kernel(out_ptr, in_ptr, ..., n_rows, n_cols, BLOCK_SIZE: tl.constexpr): ...

    softmax_kernel[grid](y, x, ..., n_rows, n_cols)                          # call sites unchanged

On the first launch for a key value, the key's argument values become the shape of an
``autotune.best_config(kernel, **shape)`` lookup (so name the kernel file's ``shape_params`` after the
``key``): the stored best config for (kernel, shape, device) -- the exact shape, else the nearest tuned
one -- is launched, and kept for that key value (a dict hit per launch after the first). When nothing is
tuned, ``fallback`` decides: ``"first"`` (the first listed config; the default), ``"default"`` (the
``default=`` config) or ``"triton"`` (Triton's own autotuning of the listed configs, as
``@triton.autotune`` would, benchmarked once per key in this process). A miss (and a nearest answer) is
asked again every ``RECHECK_S`` seconds, so rows that arrive later (the lookup's first load waits at most
``AUTOTUNE_LOOKUP_TIMEOUT``; for a shape that fell back it re-reads the database every
``AUTOTUNE_LOOKUP_RETRY`` seconds) are used without a restart; with miss recording on (see ``best_config``)
the lookup records the miss, for a nightly job or ``autotune serve`` to tune.

It never re-benchmarks what the database answers and never raises because of the database: a
missing, broken, locked or unreachable database is the fallback (``best_config`` logs one warning), and
so is a stored config that fails on its first launch (e.g. tuned for an older version of the kernel;
logged once per key).

A stored config is a dict of the space's params (``autotune space --from-triton`` makes that space from
the same list): the ``triton.Config`` kwargs plus num_warps, num_stages (num_ctas, maxnreg). A listed
config equal to it lends its ``pre_hook``. Unlike ``@triton.autotune``, the key does not include the
tensors' dtypes (the lookup's shape is the key values only): tune a kernel per dtype under two kernel
names if both run. Key values must be integers (or bools); a launch whose key is not takes the fallback.

``AUTOTUNE_PRINT=1`` prints the config chosen for each key value once (and again if a recheck changes it),
as ``TRITON_PRINT_AUTOTUNING=1`` does for Triton's autotuner; ``last_source`` says where the last launch's
config came from: exact (the key's shape is tuned), nearest (the nearest tuned shape), or the fallback:
first, default or triton.

Works under ``TRITON_INTERPRET=1`` on a CPU (with ``fallback="triton"`` it then times configs by wall
clock, since Triton's benchmarker needs a GPU driver)."""

from __future__ import annotations

import inspect
import logging
import operator
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import triton
from triton.runtime.jit import KernelInterface

from autotune.space.triton import config_key, listed_configs, to_triton_config

log = logging.getLogger(__name__)

FALLBACKS = ("first", "default", "triton")
#: ``last_source`` of a config the database answered: the key's own shape, or the nearest tuned one
_FROM_DATABASE = ("exact", "nearest")
#: seconds before a key that the database did not answer is asked again
RECHECK_S = 5.0


class _Choice:
    """What a key value launches: a config (its launch kwargs and pre_hook), or Triton's autotuning."""

    __slots__ = ("config", "hook", "kwargs", "recheck_at", "source", "tuned_shape")

    def __init__(self, config: Any, source: str, recheck_at: float = 0.0, tuned_shape: str = "") -> None:
        self.config = config  # a triton.Config, or None for Triton's autotuning
        self.source = source  # "exact" or "nearest" (the database's), "first", "default" or "triton"
        self.tuned_shape = tuned_shape  # the tuned shape a nearest answer came from
        self.kwargs = config.all_kwargs() if config is not None else None
        self.hook = getattr(config, "pre_hook", None)
        self.recheck_at = recheck_at  # 0: final (a database answer)


class DatabaseAutotuner(KernelInterface):
    """``@triton.autotune``'s ``Autotuner``, but the config comes from ``autotune.best_config``.

    Attributes like Triton's: ``fn``, ``arg_names``, ``configs``, ``keys``, ``best_config`` (the
    ``triton.Config`` of the last launch); plus ``kernel`` (the stored kernel name) and ``last_source``
    (where the last launch's config came from: exact, nearest, first, default or triton)."""

    def __init__(
        self,
        fn: Any,
        arg_names: Sequence[str],
        configs: Sequence[Any],
        key: Sequence[str],
        *,
        kernel: str,
        db: str | None = None,
        fallback: str | None = None,
        default: Any = None,
        record: bool | str | None = None,
        triton_options: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(kernel, str) or not kernel.strip():
            raise ValueError("autotune(kernel=...): the stored kernel name must be a non-empty string")
        fallback = fallback or ("default" if default is not None else "first")
        if fallback not in FALLBACKS:
            raise ValueError(f"autotune(fallback={fallback!r}): choose one of {', '.join(FALLBACKS)}")
        if fallback == "default" and default is None:
            raise ValueError('autotune(fallback="default") needs default= (a triton.Config or a config dict)')
        self.configs = list(configs) or [triton.Config({})]
        if isinstance(key, str):
            key = [key]
        self.keys = list(key)
        unknown = [k for k in self.keys if k not in arg_names]
        if unknown:
            raise ValueError(f"autotune(key=...): {', '.join(unknown)} not among the kernel's arguments")
        self.fn = fn
        self.base_fn = fn
        while not inspect.isfunction(self.base_fn) and hasattr(self.base_fn, "fn"):
            self.base_fn = self.base_fn.fn
        self.arg_names = list(arg_names)
        self.kernel = kernel
        self.db = db
        self.fallback = fallback
        self.record = record
        self._triton_options = dict(triton_options or {})
        self._listed = listed_configs(self.configs)
        if fallback == "default":
            self._fallback: _Choice = _Choice(_as_config(default, self._listed), "default")
        elif fallback == "first":
            self._fallback = _Choice(self.configs[0], "first")
        else:
            self._fallback = _Choice(None, "triton")  # Triton's autotuner, built on the first miss
        self._triton: Any = None
        self._positions = [self.arg_names.index(k) for k in self.keys]
        self._getter = operator.itemgetter(*self._positions) if self._positions else None
        self._need = max(self._positions, default=-1) + 1
        self._chosen: dict[Any, _Choice] = {}
        self.best_config: Any = None
        self.last_source: str | None = None

    # ------------------------------------------------------------------ the launch path

    def run(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) >= self._need and self._getter is not None:
            key = self._getter(args)  # one key: the value itself; several: a tuple
        else:
            key = self._key_slow(args, kwargs)
        choice = self._chosen.get(key)
        if choice is None or (choice.recheck_at and time.monotonic() >= choice.recheck_at):
            choice = self._choose(key, args, kwargs)
            if choice.source in _FROM_DATABASE:
                return self._first_launch(choice, key, args, kwargs)
        return self._launch(choice, args, kwargs)

    def _launch(self, choice: _Choice, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.last_source = choice.source
        if choice.config is None:
            return self._triton_run(args, kwargs)
        self.best_config = choice.config
        if choice.hook is not None:
            choice.hook({**dict(zip(self.arg_names, args, strict=False)), **kwargs, **choice.kwargs})
        return self.fn.run(*args, **kwargs, **choice.kwargs)

    def _first_launch(self, choice: _Choice, key: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The first launch of a stored config: one that does not fit this kernel (a renamed parameter, a
        value its code rejects, tuned for another version of it) falls back instead of raising."""
        try:
            return self._launch(choice, args, kwargs)
        except Exception as e:
            fallback = self._fallback
            log.warning(
                "autotune: the stored config %s of kernel %r failed to launch (%s: %.200s); using the %s "
                "fallback for this key",
                dict(choice.kwargs or {}),
                self.kernel,
                type(e).__name__,
                e,
                fallback.source,
            )
            # final: the database would answer the same again
            self._chosen[key] = _Choice(fallback.config, fallback.source)
            return self._launch(self._chosen[key], args, kwargs)

    def _key_slow(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        named = {**dict(zip(self.arg_names, args, strict=False)), **kwargs}
        values = tuple(named.get(k) for k in self.keys)
        return values[0] if len(values) == 1 else values

    # ------------------------------------------------------------------ choosing (first launch of a key)

    def _choose(self, key: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Choice:
        values = key if len(self.keys) > 1 else (key,)
        shape = _shape(self.keys, values)
        config, match, tuned_shape = None, "", ""
        if shape is not None:
            try:
                config, match, tuned_shape = self._lookup(shape, _device_of(args, kwargs))
            except Exception as e:  # best_config never raises; this guards our own conversion too
                log.warning("autotune: lookup of kernel %r failed (%s); using the fallback", self.kernel, e)
        if config is not None:
            # an exact answer is final; a nearest one is asked again, as a miss is: the lookup re-reads
            # the database for it (every AUTOTUNE_LOOKUP_RETRY s), so a tuning of this very shape is used
            recheck = time.monotonic() + RECHECK_S if match == "nearest" else 0.0
            choice = _Choice(config, match, recheck, tuned_shape)
        else:
            fallback = self._fallback
            # asked again later: the database may still be loading (or be tuned meanwhile); a key that
            # is not a shape stays a miss
            recheck = 0.0 if shape is None else time.monotonic() + RECHECK_S
            choice = _Choice(fallback.config, fallback.source, recheck)
        previous = self._chosen.get(key)
        self._chosen[key] = choice
        if (previous is None or (previous.source, previous.kwargs) != (choice.source, choice.kwargs)) and (
            _print_choices()
        ):
            print(self._describe(shape, values, choice), flush=True)
        return choice

    def _describe(self, shape: dict[str, int] | None, values: Sequence[Any], choice: _Choice) -> str:
        """The ``AUTOTUNE_PRINT`` line of a key's choice."""
        if shape is not None:
            key_text = ", ".join(f"{k}={v}" for k, v in shape.items())
        else:
            key_text = ", ".join(f"{k}={v!r}" for k, v in zip(self.keys, values, strict=True))
        if choice.config is None:
            return f"autotune: kernel {self.kernel} ({key_text}): Triton's autotuning of the listed configs"
        config = ", ".join(f"{k}: {v}" for k, v in (choice.kwargs or {}).items())
        where = {
            "exact": "tuned for this shape",
            "nearest": f"tuned for the nearest shape {choice.tuned_shape}",
            "first": "not tuned: the first listed config",
            "default": "not tuned: the default config",
        }[choice.source]
        return f"autotune: kernel {self.kernel} ({key_text}): {config} ({where})"

    def _lookup(self, shape: dict[str, int], device: str) -> tuple[Any, str, str]:
        """(the stored config as a triton.Config or None, exact or nearest, the tuned shape if nearest)."""
        from autotune.runtime.lookup import best_config_match

        stored, match, tuned_shape = best_config_match(
            self.kernel, default=None, db=self.db, device=device, record=self.record, **shape
        )
        if not isinstance(stored, Mapping) or not stored:
            return None, "", ""
        return _as_config(stored, self._listed), match, tuned_shape

    def _triton_run(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self._triton is None:
            from triton.runtime.autotuner import Autotuner

            options = dict(self._triton_options)
            if options.get("do_bench") is None and _interpreted(self.fn):
                options["do_bench"] = wall_clock_bench
            self._triton = Autotuner(
                self.fn,
                self.arg_names,
                self.configs,
                self.keys,
                options.pop("reset_to_zero", None),
                options.pop("restore_value", None),
                **options,
            )
        out = self._triton.run(*args, **kwargs)
        self.best_config = self._triton.best_config
        return out

    def warmup(self, *args: Any, **kwargs: Any) -> Any:
        """Compile every listed config ahead (as ``Autotuner.warmup``), e.g. to fill Triton's cache."""
        return [self.fn.warmup(*args, **kwargs, **c.all_kwargs()) for c in self.configs]


def autotune(
    configs: Sequence[Any],
    key: Sequence[str],
    *,
    kernel: str,
    db: str | None = None,
    fallback: str | None = None,
    default: Any = None,
    record: bool | str | None = None,
    prune_configs_by: Mapping[str, Any] | None = None,
    reset_to_zero: Sequence[str] | None = None,
    restore_value: Sequence[str] | None = None,
    pre_hook: Callable[..., Any] | None = None,
    post_hook: Callable[..., Any] | None = None,
    do_bench: Callable[..., Any] | None = None,
    cache_results: bool = False,
) -> Callable[[Any], DatabaseAutotuner]:
    """Decorate a ``@triton.jit`` function like ``@triton.autotune(configs=, key=)``, reading the config
    of ``kernel`` (its stored name) from the database (``db``: a URL, SQLite path or exported JSON;
    default ``AUTOTUNE_DB``). ``fallback``: "first" (default), "default" (needs ``default=``) or "triton";
    ``record``: passed to ``best_config`` (miss recording) when it takes it. The Triton arguments after
    it are used only by ``fallback="triton"``, as ``@triton.autotune`` uses them."""
    triton_options = {
        "prune_configs_by": prune_configs_by,
        "reset_to_zero": reset_to_zero,
        "restore_value": restore_value,
        "pre_hook": pre_hook,
        "post_hook": post_hook,
        "do_bench": do_bench,
        "cache_results": cache_results,
    }

    def decorator(fn: Any) -> DatabaseAutotuner:
        return DatabaseAutotuner(
            fn,
            fn.arg_names,
            configs,
            key,
            kernel=kernel,
            db=db,
            fallback=fallback,
            default=default,
            record=record,
            triton_options=triton_options,
        )

    return decorator


# ---------------------------------------------------------------------- helpers


def _as_config(config: Any, listed: Mapping[tuple[tuple[str, Any], ...], Any]) -> Any:
    """A triton.Config for a stored dict (or a given Config): the listed one when equal (with its hook)."""
    if not isinstance(config, Mapping):
        return config
    d = dict(config)
    return listed.get(config_key(d)) or to_triton_config(d, like=None)


def _print_choices() -> bool:
    from autotune.settings import print_choices

    return print_choices()


def _shape(names: Sequence[str], values: Sequence[Any]) -> dict[str, int] | None:
    shape = {}
    for name, v in zip(names, values, strict=True):
        if isinstance(v, bool):
            v = int(v)
        if not isinstance(v, int):
            try:
                v = operator.index(v)  # numpy ints, 0-d integer tensors
            except TypeError:
                return None
        shape[name] = v
    return shape


def _device_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The device of the first tensor argument ('' when none: best_config's default device)."""
    for a in (*args, *kwargs.values()):
        dev = getattr(a, "device", None)
        if dev is not None and not isinstance(dev, str) and hasattr(dev, "type"):
            return str(dev)
    return ""


def _interpreted(fn: Any) -> bool:
    """Whether ``fn`` (under its decorators) runs in Triton's interpreter (created under TRITON_INTERPRET=1)."""
    from triton.runtime.interpreter import InterpretedFunction

    while not isinstance(fn, InterpretedFunction) and hasattr(fn, "fn"):
        fn = fn.fn
    return isinstance(fn, InterpretedFunction)


def wall_clock_bench(kernel_call: Callable[[], Any], quantiles: Sequence[float] = (0.5,)) -> list[float]:
    """Triton's benchmarker needs a GPU driver; in the interpreter, time a few calls by wall clock (ms).
    Also for a plain ``@triton.autotune(..., do_bench=wall_clock_bench)`` run under TRITON_INTERPRET=1."""
    kernel_call()
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        kernel_call()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return [times[min(len(times) - 1, int(q * len(times)))] for q in quantiles]
