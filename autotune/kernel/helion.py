"""A kernel file for a Helion kernel: ``HelionKernel``. Everything but the inputs is derived from Helion.

A user writes::

    class RmsNorm(HelionKernel):
        name = "rms_norm"
        fn = rms_norm                               # the @helion.kernel function
        shape_params = ("M", "N")
        default_shapes = [{"M": 4096, "N": 8192}]

        def make_inputs(self, shape, device):       # the kernel's call arguments, as a tuple
            return (torch.randn(shape["M"], shape["N"], device=device, dtype=torch.float16), ...)

    KERNEL = RmsNorm()

and gets, from Helion's own ``ConfigSpec`` of the bound inputs (never re-deriving its rules):

- **the space**: one parameter per coordinate of Helion's flat config (``ConfigGeneration.flat_spec``;
  its ``flat_key_layout`` names them), a list entry as an indexed parameter (``block_sizes: [64, 32]`` is
  ``block_sizes_0: 64, block_sizes_1: 32``; a per-memory-op list such as ``indexing`` likewise), its
  choices the fragment's ``search_values``; ``None`` is the string ``"None"`` and a loop order the string
  ``"1,0"``. A coordinate that Helion's normalization always resets at the default config (a knob of a
  feature the default leaves off) is conditional: its ``when`` names the values of a categorical
  coordinate (``pid_type``...) under which Helion keeps it; one Helion always resets is left out. The
  choices are the union over ``default_shapes``; the hash changes when Helion's spec does.
- **validity**: Helion's normalization is the validity callback. ``compile`` rejects, before compiling,
  a config that Helion would silently repair into another one (status ``invalid``, Helion's words).
- **compile** through ``bind(inputs).compile_config(config)``; on a GPU Triton compiles ahead through
  Helion's own precompiler (nothing launched); under ``TRITON_INTERPRET=1`` one launch is the check.
- **timing** by the generated Triton kernel's name, read from the compiled launcher (``_helion_<fn>``).
- **the default config** is Helion's ``default_config()`` for the first default shape; **the reference**
  Helion's eager ref mode (``BoundKernel.run_ref``) unless ``reference`` is overridden.

Stored configs are these flat dicts; ``helion_config(flat, bound)`` / ``flat_config(config, bound)`` go
to Helion's ``Config`` and back (``autotune.runtime.helion`` uses them). Importing this module imports no
helion or torch: a kernel file does."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autotune.kernel.contract import Kernel
from autotune.shapes import Shape

#: how ``None`` (Helion: "not set") appears among a parameter's choices (null is no choice of a Space)
NONE = "None"
#: a categorical coordinate with at most this many values may switch other coordinates on (``when``)
MAX_SWITCH_VALUES = 8
#: choices asked of a fragment whose range is large (Helion's own search samples those)
MAX_CHOICES = 64


class InvalidConfig(ValueError):
    """A config Helion's normalization would change: not a point of the kernel's space for these inputs.
    ``autotune.engine.faults`` types it ``invalid`` (by its name, like Helion's ``InvalidConfig``)."""


@dataclass(frozen=True)
class Coordinate:
    """One parameter of the space: an entry of Helion's config (``key``, and ``index`` in its list, None
    for a scalar) and the fragment of Helion's flat config that tunes it (``flat``; ``entry`` within a
    per-entry ``ListOf``)."""

    name: str
    key: str
    index: int | None
    flat: int
    entry: int | None


def encode(value: Any) -> Any:
    """A Helion value as a Space choice (scalars as they are; None and lists as strings)."""
    if value is None:
        return NONE
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return value


def decode(value: Any, like: Any) -> Any:
    """A Space choice back to Helion's value; ``like`` is a value of the same entry (its type)."""
    if value == NONE:
        return None
    if isinstance(like, list | tuple) and isinstance(value, str):
        return [int(v) for v in value.split(",")] if value else []
    return value


def generation(bound: Any) -> Any:
    """Helion's ``ConfigGeneration`` of a bound kernel (its flat config's fragments and layout)."""
    from helion.autotuner.config_generation import ConfigGeneration

    return ConfigGeneration(bound.config_spec)


def _values(fragment: Any) -> list[Any]:
    from helion.autotuner.config_fragment import PermutationFragment

    if isinstance(fragment, PermutationFragment):
        return [list(p) for p in itertools.permutations(range(fragment.length))]
    values = fragment.search_values(MAX_CHOICES)
    return list(values) if values is not None else [fragment.default()]


def coordinates(gen: Any) -> list[Coordinate]:
    """Every tunable entry of Helion's config, in its flat layout's order (``flat_key_layout``)."""
    from helion.autotuner.config_fragment import ListOf

    out: list[Coordinate] = []
    flat = 0
    for key, count, is_sequence in gen.config_spec.flat_key_layout():
        for i in range(count):
            fragment = gen.flat_spec[flat]
            if isinstance(fragment, ListOf):
                out += [Coordinate(f"{key}_{j}", key, j, flat, j) for j in range(fragment.length)]
            elif is_sequence:
                out.append(Coordinate(f"{key}_{i}", key, i, flat, None))
            else:
                out.append(Coordinate(key, key, None, flat, None))
            flat += 1
    return out


def _get(config: Mapping[str, Any], c: Coordinate) -> Any:
    """The entry's value in a Helion config dict (KeyError/IndexError when absent)."""
    value = config[c.key]
    return value if c.index is None else value[c.index]


def _set(config: dict[str, Any], c: Coordinate, value: Any, default: Mapping[str, Any]) -> None:
    if c.index is None:
        config[c.key] = decode(value, default.get(c.key))
        return
    entries = list(config.get(c.key, default.get(c.key, [])))
    entries[c.index] = decode(value, entries[c.index])
    config[c.key] = entries


def default_dict(gen: Any) -> dict[str, Any]:
    """Helion's default config for this spec, every entry spelled out (flatten + unflatten)."""
    return dict(gen.unflatten(copy.deepcopy(gen.flatten(gen.config_spec.default_config()))).config)


def _set_flat(flat: list[Any], c: Coordinate, value: Any) -> None:
    if c.entry is None:
        flat[c.flat] = value
    else:
        flat[c.flat][c.entry] = value


_ABSENT = object()


def _read(gen: Any, flat: list[Any], c: Coordinate) -> Any:
    """The config value (encoded) that Helion's ``unflatten`` (which repairs) gives ``c`` for ``flat``;
    ``_ABSENT`` when the repaired config leaves the entry out."""
    try:
        return encode(_get(gen.unflatten(copy.deepcopy(flat)).config, c))
    except (LookupError, TypeError):
        return _ABSENT


def _switches(gen: Any, coords: Sequence[Coordinate], base: list[Any]) -> list[tuple[Coordinate, list[Any]]]:
    """Categorical scalar coordinates (``pid_type``...) with their values: what may switch others on."""
    out = []
    for c in coords:
        if c.entry is None and c.index is None and not isinstance(base[c.flat], list):
            values = _values(gen.flat_spec[c.flat])
            if 2 <= len(values) <= MAX_SWITCH_VALUES and all(isinstance(v, str) for v in values):
                out.append((c, values))
    return out


def _probe_one(gen: Any, base: list[Any], c: Coordinate, contexts: list[tuple[Any, Any]]) -> dict[str, Any]:
    fragment = gen.flat_spec[c.flat]
    inner = fragment.inner if c.entry is not None else fragment
    current = _read(gen, base, c)
    values: dict[Any, Any] = {}
    live: list[Any] = []
    for s, u in contexts:
        context = copy.deepcopy(base)
        if s is not None:
            _set_flat(context, s, u)
        for v in _values(inner):
            flat = copy.deepcopy(context)
            _set_flat(flat, c, v)
            got = _read(gen, flat, c)
            if got is _ABSENT:
                continue
            values.setdefault(got, v)
            if got != current and True not in live:
                live.append(True if s is None else f"{s.name} == {u!r}")
    when: Any = True if True in live else (" or ".join(dict.fromkeys(live)) or False)
    return {"values": values, "when": when}


def probe(gen: Any) -> dict[str, dict[str, Any]]:
    """Per coordinate: ``values`` (config value -> a flat value giving it, over the fragment's search values,
    at the default and under each switch value) and ``when`` (True: Helion's repair keeps other values
    at the default config; an expression: only under some switch values; False: never). Helion's own
    ``unflatten`` answers every probe; no rule of its is restated here."""
    base = gen.flatten(gen.config_spec.default_config())
    coords = coordinates(gen)
    switches = _switches(gen, coords, base)
    out: dict[str, dict[str, Any]] = {}
    for c in coords:
        contexts = [(None, None)] + [(s, u) for s, vs in switches if s is not c for u in vs]
        out[c.name] = _probe_one(gen, base, c, contexts)
    return out


def space_definition(name: str, gens: Sequence[Any]) -> dict[str, Any]:
    """The Space mapping of a Helion kernel from the ``ConfigGeneration`` of each default shape (their
    layouts must agree; choices are merged). Switches (coordinates a ``when`` reads) come first, as a
    ``when`` may only read parameters declared before it."""
    probes = [probe(g) for g in gens]
    if any(list(p) != list(probes[0]) for p in probes[1:]):
        raise ValueError(f"Helion kernel {name!r}: its config layout differs between default shapes")
    whens = [p["when"] for p in probes[0].values() if isinstance(p["when"], str)]
    read = {w.split(" == ")[0] for when in whens for w in when.split(" or ")}
    params: dict[str, Any] = {}
    for key in sorted(probes[0], key=lambda k: k not in read):
        when = probes[0][key]["when"]
        values = _order(list(dict.fromkeys(v for p in probes for v in p[key]["values"])))
        if when is not False and len(values) >= 2:
            params[key] = {"values": values} | ({"when": when} if isinstance(when, str) else {})
    return {"name": name, "description": "derived from Helion's ConfigSpec", "params": params}


def _order(values: list[Any]) -> list[Any]:
    """Numbers ascending (the ordinal encoding reads their order), anything else as Helion lists it."""
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return sorted(values)
    return values


def flat_config(config: Any, gen: Any) -> dict[str, Any]:
    """A Helion ``Config`` (or its dict) as our flat dict: every tunable entry it has."""
    d = dict(getattr(config, "config", config))
    out = {}
    for c in coordinates(gen):
        try:
            out[c.name] = encode(_get(d, c))
        except (LookupError, TypeError):
            continue
    return out


def helion_config(config: Mapping[str, Any], gen: Any, strict: bool = False) -> Any:
    """Our flat dict as Helion's ``Config`` (entries it lacks: Helion's default). ``strict``: raise
    ``InvalidConfig`` when Helion rejects it or its normalization would change a given value."""
    import helion

    base = default_dict(gen)
    coords = {c.name: c for c in coordinates(gen)}
    unknown = set(config) - set(coords)
    if unknown:
        raise InvalidConfig(f"not entries of this Helion kernel's config: {', '.join(sorted(unknown))}")
    d = copy.deepcopy(base)
    for name, value in config.items():
        _set(d, coords[name], value, base)
    if strict:
        try:
            out = dict(gen.config_spec.normalized_config(d).config)
        except Exception as e:
            raise InvalidConfig(f"Helion rejects it: {e}") from None
        changed = [f"{n}={v!r}" for n, v in config.items() if encode(_get(out, coords[n])) != v]
        if changed:
            raise InvalidConfig(f"Helion's normalization changes {', '.join(changed)} for these inputs")
    return helion.Config(**d)


def triton_launch(
    compiled: Callable[..., Any], args: Sequence[Any]
) -> tuple[Any, tuple[int, ...], tuple, dict]:
    """(the Triton kernel, grid, args, kwargs) of one call of a compiled Helion config, without launching:
    Helion's launcher hook (``_launcher=``) receives them."""

    class _Extracted(Exception):
        pass

    def extract(kernel: Any, grid: Any, *a: Any, **kw: Any) -> None:
        raise _Extracted(kernel, tuple(grid), a, kw)

    try:
        compiled(*args, _launcher=extract)
    except _Extracted as e:
        return e.args
    raise RuntimeError("the Helion kernel launched no Triton kernel")


def triton_kernel_name(compiled: Callable[..., Any], args: Sequence[Any]) -> str:
    """The generated Triton kernel's name (what the profiler shows), read from the launch."""
    kernel = triton_launch(compiled, args)[0]
    fn = getattr(kernel, "fn", kernel)
    return str(getattr(fn, "__name__", None) or getattr(kernel, "__name__", ""))


def interpreted() -> bool:
    import os

    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


#: what a user gives a HelionKernel (as keyword arguments, or as class attributes and methods)
_GIVEN = frozenset(
    {"name", "fn", "shape_params", "default_shapes", "make_inputs", "reference", "flops", "bytes_moved"}
    | {"dtypes", "rtol", "atol", "check_ulps", "check_max_diff"}
)


class HelionKernel(Kernel):
    """A ``TunableKernel`` for one ``@helion.kernel`` function (see the module docstring). Set ``name``,
    ``fn``, ``shape_params``, ``default_shapes`` and ``make_inputs`` (class attributes and a method, or
    keyword arguments); optionally ``reference``, ``flops``, ``bytes_moved``, ``dtypes``, ``rtol``/``atol``."""

    fn: Any = None

    def __init__(self, **given: Any) -> None:
        for key, value in given.items():
            if key not in _GIVEN:
                raise TypeError(
                    f"HelionKernel: unknown argument {key!r} (one of {', '.join(sorted(_GIVEN))})"
                )
            setattr(self, key, value)
        if self.fn is None or not hasattr(self.fn, "bind"):
            raise TypeError(f"HelionKernel {self.name!r}: fn must be a @helion.kernel function")
        if not self.shape_params and self.default_shapes:
            self.shape_params = tuple(self.default_shapes[0])
        self._derived: dict[str, Any] | None = None
        self._bound: tuple[Any, Any, Any] | None = None  # (inputs, bound kernel, generation)
        self._ref: Any = None

    # ---- derived from Helion, once per process (the worker's), on first use

    def _derive(self) -> dict[str, Any]:
        if self._derived is None:
            device = _spec_device()
            inputs = [tuple(self.make_inputs(dict(s), device)) for s in self.default_shapes]
            bounds = [self.fn.bind(args) for args in inputs]
            gens = [generation(b) for b in bounds]
            default = bounds[0].config_spec.default_config()
            compiled = bounds[0].compile_config(default, allow_print=False)
            self._derived = {
                "space": space_definition(self.name, gens),
                "default": flat_config(default_dict(gens[0]), gens[0]),
                "kernel_name": triton_kernel_name(compiled, inputs[0]),
            }
        return self._derived

    @property
    def space(self) -> dict[str, Any]:  # type: ignore[override]
        return self._derive()["space"]

    @property
    def default_config(self) -> dict[str, Any]:  # type: ignore[override]
        from autotune.space import Space

        d = self._derive()
        return active_part(Space.from_dict(d["space"]), d["default"])

    @property
    def kernel_names(self) -> tuple[str, ...]:  # type: ignore[override]
        return (self._derive()["kernel_name"],)

    # ---- the contract

    def bound(self, inputs: Any) -> tuple[Any, Any]:
        """(Helion's bound kernel, its ConfigGeneration) for these inputs, kept for the current ones."""
        if self._bound is None or self._bound[0] is not inputs:
            bound = self.fn.bind(tuple(inputs))
            self._bound = (inputs, bound, generation(bound))
        return self._bound[1], self._bound[2]

    def compile(self, config: Mapping[str, Any], inputs: Any) -> Callable[[], Any]:
        """Helion's config for ``config`` (``InvalidConfig`` if Helion would repair it), compiled; Triton
        compiles ahead through Helion's precompiler on a GPU (no launch), once launched in the interpreter."""
        bound, gen = self.bound(inputs)
        cfg = helion_config(config, gen, strict=True)
        compiled = bound.compile_config(cfg, allow_print=False)
        args = tuple(inputs)
        if interpreted():
            compiled(*args)
        else:
            from helion.autotuner.benchmark_provider import _triton_compile

            if not _triton_compile(compiled, args, cfg, bound):
                raise RuntimeError(f"Triton failed to compile Helion config {dict(cfg)}")
        return launcher(compiled, args, self.kernel_names[0])

    def reference(self, inputs: Any) -> Any:
        """Helion's eager ref mode of the same function (its PyTorch ops run as written). Override it where
        that mode lacks an op on this device (e.g. a fp16 ``addmm`` on a CPU)."""
        if self._ref is None:
            import helion

            self._ref = helion.kernel(self.fn.fn, ref_mode=helion.RefMode.EAGER)
        return self._ref(*tuple(inputs))

    def flops(self, shape: Shape) -> float:
        return 0.0


def active_part(space: Any, flat: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters of ``flat`` (every coordinate) that are active in ``space``: its config there."""
    out: dict[str, Any] = {}
    for p in space.params:
        if p.name in flat and p.active(out):
            out[p.name] = flat[p.name]
    return out


def _spec_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def launcher(compiled: Callable[..., Any], args: tuple[Any, ...], name: str) -> Callable[[], Any]:
    """A call of ``compiled`` on ``args``; on a CPU wrapped in a profiler range named ``name``, so the bench
    times it by name as it times the device kernel on a GPU."""

    from autotune.kernel.triton import named_on_cpu

    def run() -> Any:
        return compiled(*args)

    return named_on_cpu(run, name, args)
