"""A kernel file for an existing Triton kernel in a few lines: ``TritonKernel``.

The common case of the kernel-file contract (``autotune.kernel``) is "a ``@triton.jit`` kernel, a grid,
input makers and a reference"; this class fills in the rest::

    KERNEL = TritonKernel(
        softmax_kernel,                       # the @triton.jit function (or its @autotune / @triton.autotune)
        name="softmax",
        configs=CONFIGS,                      # a triton.Config list -> the search space (or space="softmax")
        inputs=lambda shape, device: {"x": torch.randn(shape["n_rows"], shape["n_cols"], device=device)},
        output=lambda i: torch.empty_like(i["x"]),
        args=lambda i, out: (out, i["x"], i["x"].stride(0), out.stride(0), *i["x"].shape),
        grid=lambda meta: (meta["n_rows"],),  # Triton's convention: the kernel's named args + the config
        reference=lambda i: torch.softmax(i["x"].float(), dim=-1).to(i["x"].dtype),
        shapes=[{"n_rows": 4096, "n_cols": 8192}],
        flops=lambda shape: 5.0 * shape["n_rows"] * shape["n_cols"],  # for TFLOP/s (the contract needs it)
    )

- ``configs`` become the space through ``autotune.space.triton.space_from_configs`` (the listed
  combinations are the valid set); ``space=`` names a YAML space instead (or widens the list).
- ``default_config`` defaults to the first config; ``shape_params`` to the first shape's keys, which
  should be the ``key=`` of the kernel's ``@autotune`` (the lookup's shape names).
- ``args`` returns the positional args (a tuple) or the args by name (a mapping); ``grid`` is a tuple
  or a callable of Triton's ``META`` (the named args and the config's values).
- The device kernel is named after the jit function, which is what ``kernel_names`` defaults to; on a
  CPU (Triton's interpreter) each launch is wrapped in a profiler range of that name, so the bench
  times it there too.
- A listed config's ``pre_hook`` runs before each launch of that config, as in ``@triton.autotune``.
- ``compile()`` compiles ahead without launching (``compile_ahead``: Triton's ``JITFunction.warmup``), so
  a compile worker never runs a config on the GPU being timed and a fault of the first launch surfaces in
  the timing worker's run, typed (``autotune.engine.faults``); under the interpreter, which compiles
  nothing, it launches once instead. ``Launch`` and ``compile_launches`` do the same for a kernel file
  that builds its launches itself (examples/gemm_fp8.py).

Importing this module imports no triton or torch; the kernel file does."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from autotune.kernel.contract import Kernel
from autotune.shapes import Shape
from autotune.space.triton import config_dict, config_key, listed_configs, space_from_configs


def named_on_cpu(run: Callable[[], Any], name: str, values: Iterable[Any]) -> Callable[[], Any]:
    """``run`` itself where any of ``values`` lives on a device; where all are on the CPU (Triton's
    interpreter, which launches no device kernel), ``run`` inside a profiler range named ``name``, so that
    ``bench_kineto`` times it by the kernel's name there too."""
    if any(getattr(getattr(a, "device", None), "type", "cpu") != "cpu" for a in values):
        return run
    import torch

    def run_named() -> Any:
        with torch.profiler.record_function(name):
            return run()

    return run_named


def jit_function(fn: Any) -> Any:
    """The ``@triton.jit`` function under decorators (``@autotune``, ``@triton.autotune``,
    ``@triton.heuristics``): each of them keeps the function it wraps in ``.fn``."""
    base = fn
    while _is_wrapper(base):
        base = base.fn
    return base


def _is_wrapper(obj: Any) -> bool:
    # Triton's Autotuner and Heuristics (and our drop-in) have arg_names too, but also a wrapped .fn
    # that itself has arg_names; a JITFunction's .fn is the plain Python function.
    inner = getattr(obj, "fn", None)
    return inner is not None and hasattr(inner, "arg_names")


def is_interpreted(fn: Any) -> bool:
    """Whether ``fn`` runs in Triton's interpreter (TRITON_INTERPRET=1 when it was decorated): there is
    nothing to compile ahead then, a launch is the only check."""
    return type(jit_function(fn)).__name__ == "InterpretedFunction"


def compile_ahead(fn: Any, grid: Any, *args: Any, target: Any = None, **meta: Any) -> Any:
    """Compile ``fn`` (a ``@triton.jit`` function, or a decorator over one) for these arguments and
    constexprs/options (``num_warps=``...) without launching it, and return Triton's compiled kernel; a
    compile error raises here. The launch that follows with the same arguments finds it in Triton's
    caches. ``args`` may be tensors or dtypes (Triton's warm-up convention).

    ``target`` (a ``triton.backends.compiler.GPUTarget``, e.g. ``GPUTarget("cuda", 90, 32)``) compiles for
    that device from any machine, a CPU included (no driver needed); the result is not loaded. Under the
    interpreter it returns None (nothing to compile). Uses Triton 3.6's ``JITFunction.warmup`` and, for a
    target, ``triton.compile(ASTSource(...))`` as ``JITFunction.run`` builds it."""
    jit = jit_function(fn)
    if is_interpreted(jit):
        return None
    if target is None:
        return jit.warmup(*args, grid=grid, **meta)
    import triton
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import MockTensor, create_function_from_signature

    backend = make_backend(target)
    meta = {"debug": False, "instrumentation_mode": "", **meta}
    args = tuple(MockTensor.wrap_dtype(a) for a in args)
    bound, spec, options = create_function_from_signature(jit.signature, jit.params, backend)(*args, **meta)
    options, signature, constexprs, attrs = jit._pack_args(backend, meta, bound, spec, options)
    return triton.compile(
        ASTSource(jit, signature, constexprs, attrs), target=target, options=options.__dict__
    )


@dataclass(frozen=True)
class Launch:
    """One launch of a Triton kernel, kept as data so that it can be compiled ahead or run."""

    fn: Any
    grid: tuple[int, ...]
    args: tuple[Any, ...]
    meta: dict[str, Any] = field(default_factory=dict)

    def __call__(self) -> None:
        self.fn[self.grid](*self.args, **self.meta)

    def compile(self, target: Any = None) -> Any:
        return compile_ahead(self.fn, self.grid, *self.args, target=target, **self.meta)


def compile_launches(launches: Iterable[Launch], target: Any = None) -> list[Any]:
    """Compile every launch ahead, none launched (see ``compile_ahead``)."""
    return [launch.compile(target) for launch in launches]


class TritonKernel(Kernel):
    """A ``TunableKernel`` for one ``@triton.jit`` function (see the module docstring)."""

    def __init__(
        self,
        fn: Any,
        *,
        name: str,
        inputs: Callable[[Shape, str], Any],
        output: Callable[[Any], Any],
        args: Callable[[Any, Any], Sequence[Any] | Mapping[str, Any]],
        grid: Sequence[int] | Callable[[dict[str, Any]], Sequence[int]],
        reference: Callable[[Any], Any],
        shapes: Sequence[Mapping[str, int]],
        flops: Callable[[Shape], float] | None = None,
        configs: Sequence[Any] | None = None,
        space: str | Mapping[str, Any] | None = None,
        default_config: Mapping[str, Any] | Any = None,
        shape_params: Sequence[str] | None = None,
        dtypes: Mapping[str, str] | None = None,
        rtol: float = 1e-2,
        atol: float = 1e-2,
        bytes_moved: Callable[[Shape], float] | None = None,
        kernel_names: Sequence[str] | None = None,
    ) -> None:
        self.fn = jit_function(fn)
        if configs is None:
            configs = getattr(fn, "configs", None)  # a decorated kernel brings its list
        self.configs = list(configs or [])
        if space is None and not self.configs:
            raise ValueError(f"TritonKernel {name!r}: give configs= (a triton.Config list) or space=")
        self.name = name
        self.space = space if space is not None else space_from_configs(self.configs, name)
        if default_config is None:
            if not self.configs:
                raise ValueError(f"TritonKernel {name!r}: give default_config= (no configs to take it from)")
            default_config = self.configs[0]
        self.default_config = config_dict(default_config)
        self.default_shapes = tuple(dict(s) for s in shapes)
        self.shape_params = tuple(shape_params or (self.default_shapes[0] if self.default_shapes else ()))
        self.kernel_names = tuple(kernel_names or (self.fn.__name__,))
        self.dtypes = dict(dtypes or {})
        self.rtol, self.atol = rtol, atol
        self._inputs, self._output, self._args, self._grid = inputs, output, args, grid
        self._reference, self._flops, self._bytes = reference, flops, bytes_moved
        self._listed = listed_configs(self.configs)

    def make_inputs(self, shape: Shape, device: str) -> Any:
        return self._inputs(shape, device)

    def compile(self, config: Mapping[str, Any], inputs: Any) -> Callable[[], Any]:
        """The config's launcher, compiled ahead (or loaded from Triton's cache) but not launched: a compile
        error surfaces here, a fault of the first launch in the run. The interpreter compiles nothing: there
        a launch is the only check."""
        out = self._output(inputs)
        launch = self.launcher(config, inputs, out)
        if is_interpreted(self.fn):
            launch()
        else:
            pos, kwargs, grid = self._call(config, inputs, out)
            compile_ahead(self.fn, grid, *pos, **kwargs)
        return launch

    def _call(
        self, config: Mapping[str, Any], inputs: Any, out: Any
    ) -> tuple[tuple[Any, ...], dict[str, Any], tuple[int, ...]]:
        """The positional args, keyword args (with the config) and grid of a launch."""
        return self._launch_args(config, inputs, out)[:3]

    def _launch_args(
        self, config: Mapping[str, Any], inputs: Any, out: Any
    ) -> tuple[tuple[Any, ...], dict[str, Any], tuple[int, ...], dict[str, Any]]:
        """The positional args, keyword args (with the config), grid and every argument by name of a launch."""
        given = self._args(inputs, out)
        names = list(self.fn.arg_names)
        if isinstance(given, Mapping):
            pos: tuple[Any, ...] = ()
            named = dict(given)
        else:
            pos, named = tuple(given), {}
        meta = {**dict(zip(names, pos, strict=False)), **named, **config}
        grid = self._grid(meta) if callable(self._grid) else self._grid
        return pos, {**named, **config}, tuple(grid), meta

    def launcher(self, config: Mapping[str, Any], inputs: Any, out: Any) -> Callable[[], Any]:
        """A zero-arg callable that runs ``config`` on ``inputs`` into ``out`` and returns ``out``."""
        pos, kwargs, grid, meta = self._launch_args(config, inputs, out)
        kernel = self.fn[grid]
        hook = getattr(self._listed.get(config_key(config)), "pre_hook", None)

        def run() -> Any:
            if hook is not None:
                hook(meta)
            kernel(*pos, **kwargs)
            return out

        return named_on_cpu(run, self.kernel_names[0], meta.values())

    def reference(self, inputs: Any) -> Any:
        return self._reference(inputs)

    def flops(self, shape: Shape) -> float:
        if self._flops is None:
            raise NotImplementedError  # optional: no TFLOP/s shown
        return float(self._flops(shape))

    def bytes_moved(self, shape: Shape) -> float:
        return float(self._bytes(shape)) if self._bytes else 0.0
