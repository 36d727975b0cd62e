"""The kernel-file contract and loading a user's kernel file.

A kernel file is a plain Python file that defines one module-level object named ``KERNEL`` which
satisfies :class:`TunableKernel` (structurally; subclassing :class:`Kernel` gives sensible defaults).
The orchestrator never imports kernel files: only the worker process does (see ``autotune.engine.worker``).
This module imports no torch at import time, so loading the contract is cheap and CUDA-free."""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from autotune.errors import KernelFileError, KernelHookError
from autotune.shapes import Shape, check_shape

#: attributes every kernel object must have (data) and methods it must implement
REQUIRED_ATTRIBUTES = ("name", "kernel_names", "space", "default_config", "default_shapes", "shape_params")
REQUIRED_METHODS = ("make_inputs", "compile", "reference")
#: optional methods whose figure is shown only where defined (many non-GEMM kernels have no FLOP count)
OPTIONAL_HOOKS = ("flops", "bytes_moved")
#: default elementwise bound of ``compare_outputs``, in units of the output dtype's machine epsilon at
#: max(|ref|, rms(ref)). Not 1-2: an output is rounded once, but the sum behind it is accumulated in
#: another order, or (Hopper FP8 wgmma, cuBLASLt's fast accumulation) with ~14-bit accumulators, whose
#: error does not shrink with the value: on 4096x7168x16384, correct split-K configs had one element in
#: 29M that was 0.031 RMS (4 bf16 ulps of the RMS) away from cuBLASLt.
CHECK_ULPS = 8.0
#: what each optional hook's number is shown as
_HOOK_FIGURE = {"flops": "TFLOP/s", "bytes_moved": "GB/s"}


@runtime_checkable
class TunableKernel(Protocol):
    """What a kernel file declares, as the module-level object ``KERNEL``.

    - ``name``: the kernel's stored name (``autotune best NAME``, ``best_config(NAME, ...)``).
    - ``kernel_names``: substrings of the device-kernel names to time with ``bench_kineto``.
    - ``space``: a search-space name (``search_spaces/<name>.yaml``), a path to a YAML file (relative to
      the kernel file), or an inline mapping in the same format.
    - ``default_config``: what runs when nothing is tuned; the baseline of every speedup.
    - ``default_shapes``: shapes ``autotune search`` tunes when no ``--shape`` is given.
    - ``shape_params``: the names of a shape's dimensions, in order (e.g. ``("M", "N", "K")``).
    - ``dtypes``: element types, stored with the shape key (e.g. ``{"a": "float8_e4m3fn", "out": "bfloat16"}``).
    - ``rtol`` / ``atol``: extra elementwise slack of the correctness check (``compare_outputs``);
      ``check_ulps`` / ``check_max_diff``: its bound in units of the output dtype's precision and its
      global similarity bound (see ``compare_outputs``).

    Optional hooks: ``flops(shape)`` and ``bytes_moved(shape)`` (TFLOP/s and GB/s are shown only where
    defined: a hook that is missing, raises ``NotImplementedError`` or returns 0 defines none; one that
    raises anything else is a ``KernelHookError``, reported with the measurement, which stands);
    ``features(config, shape, facts) -> dict[str, float]``, analytic features of a config
    on a shape (tiles, waves over the SMs, shared memory...) that the ``auto`` strategy's model learns
    from besides the raw parameters. Called in a worker process, never on the orchestrator.
    """

    name: str
    kernel_names: Sequence[str]
    space: str | Mapping[str, Any]
    default_config: Mapping[str, Any]
    default_shapes: Sequence[Mapping[str, int]]
    shape_params: Sequence[str]
    dtypes: Mapping[str, str]
    rtol: float
    atol: float

    def make_inputs(self, shape: Shape, device: str) -> Any:
        """Fresh random inputs for ``shape`` on ``device`` (never zeros: zeros hide wrong results)."""

    def compile(self, config: Mapping[str, Any], inputs: Any) -> Callable[[], Any]:
        """Compile ``config`` for these inputs and return a launcher that runs it once and returns the output.

        Compilation happens here, not in the launcher, so compile time and failures are told apart from
        launches, and a pool of processes can compile ahead (filling Triton's disk cache)."""

    def reference(self, inputs: Any) -> Any:
        """The correct output for ``inputs``."""

    def timed_kernels(self, config: Mapping[str, Any]) -> tuple[str, ...]:
        """Kernel names launched by ``config`` (a split-K config may launch a reduction too).

        A kernel file may offer several implementations of one operation (compile *or select*): a
        categorical parameter (gemm_fp8's ``IMPL``: its Triton kernel, a persistent variant, or the
        library's ``torch._scaled_mm``) makes each one a candidate like any other, and this hook names
        each implementation's own kernels (cuBLASLt's are ``nvjet_*``), so the stored best config may be
        the library's. Parameters that belong to one implementation are conditional in the space
        (``{values: [...], when: "IMPL == 'triton'"}``: absent from the other implementations' configs),
        and constraints on them take a ``when`` too. ``compile`` and every runtime user of
        ``best_config`` dispatch on that parameter; a config without it should keep meaning what it
        meant before the parameter existed (stored configs of the older space stay runnable)."""

    def compare(self, out: Any, ref: Any) -> str | None:
        """``None`` if ``out`` matches ``ref`` within tolerance, else a short description of the mismatch."""


class Kernel:
    """Convenience base class: subclass it and fill in the class attributes and methods."""

    name: str = ""
    kernel_names: Sequence[str] = ()
    space: str | Mapping[str, Any] = ""
    default_config: Mapping[str, Any] = {}
    default_shapes: Sequence[Mapping[str, int]] = ()
    shape_params: Sequence[str] = ()
    dtypes: Mapping[str, str] = {}
    rtol: float = 1e-2
    atol: float = 1e-2
    check_ulps: float = CHECK_ULPS
    check_max_diff: float | None = None

    def make_inputs(self, shape: Shape, device: str) -> Any:  # pragma: no cover - must be overridden
        raise NotImplementedError

    def compile(self, config: Mapping[str, Any], inputs: Any) -> Callable[[], Any]:  # pragma: no cover
        raise NotImplementedError

    def reference(self, inputs: Any) -> Any:  # pragma: no cover
        raise NotImplementedError

    def flops(self, shape: Shape) -> float:
        """Floating-point operations of one call (for TFLOP/s); optional: not defined by default."""
        raise NotImplementedError

    def bytes_moved(self, shape: Shape) -> float:
        """Bytes read and written by one call (for GB/s); optional: not defined by default."""
        raise NotImplementedError

    def timed_kernels(self, config: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(self.kernel_names)

    def compare(self, out: Any, ref: Any) -> str | None:
        return compare_outputs(
            out, ref, ulps=self.check_ulps, rtol=self.rtol, atol=self.atol, max_diff=self.check_max_diff
        )


def _precision(t: Any) -> float:
    """Machine epsilon of a tensor's dtype (0 for integers and bools: those must match exactly)."""
    import torch

    return float(torch.finfo(t.dtype).eps) if t.dtype.is_floating_point else 0.0


def check_metrics(out: Any, ref: Any) -> dict[str, float]:
    """How far ``out`` is from ``ref``: ``diff`` = 1 - 2<o,r>/(|o|^2+|r|^2) (DeepGEMM's ``calc_diff``:
    0 when equal, ~ relative error^2 / 2), the RMS of ``ref`` and the largest elementwise error in
    units of eps(out dtype) x max(|ref|, rms(ref)) (``max_ulps``). Computed in float64 where the output
    lives (moving a large GPU output to the host costs more than the check)."""
    o, r = out.detach().double(), ref.detach().to(device=out.device).double()
    rms = float(r.square().mean().sqrt()) if r.numel() else 0.0
    denom = float((o * o + r * r).sum())
    diff = 1.0 - 2.0 * float((o * r).sum()) / denom if denom > 0 else 0.0
    eps = _precision(out) or 1.0
    scale = r.abs().clamp_min(max(rms, 1e-30))
    max_ulps = float(((o - r).abs() / (eps * scale)).max()) if r.numel() else 0.0
    return {"diff": diff, "rms": rms, "max_ulps": max_ulps}


def compare_outputs(
    out: Any,
    ref: Any,
    *,
    ulps: float = CHECK_ULPS,
    rtol: float = 0.0,
    atol: float = 0.0,
    max_diff: float | None = None,
) -> str | None:
    """The default correctness check: ``None`` if ``out`` matches ``ref``, else what is wrong.

    Made to pass rounding differences (a sum in another order, split-K partials, another accumulation
    precision: at most a few units of the output dtype's precision per element) and to fail real bugs
    (a dropped K tile, a dropped scale, a wrong edge tile). Passes when all of:

    - same shape, every value finite;
    - elementwise: ``|o - r| <= ulps * eps * max(|r|, rms(r)) + atol + rtol * |r|`` with ``eps`` the
      output dtype's machine epsilon (bf16: 2^-7) -- relative to each value, floored at the RMS so that
      values near 0 (cancellation) are not held to a tighter bound than the output's scale allows;
    - globally: ``diff <= max_diff`` (``check_metrics``), default ``max(eps^2, rtol^2)``: pure rounding
      gives ~eps^2/24, a 1 % error everywhere (a wrong scale) 5e-5.

    The wave-1 check (``isclose`` at 0.02 of the RMS) rejected valid split-K GEMMs for one element 0.031
    RMS off; a dropped K tile moves elements by ~RMS/sqrt(K tiles), far past 8 ulps (and the diff)."""
    import torch

    if not isinstance(out, torch.Tensor):
        return f"output is {type(out).__name__}, not a tensor"
    if tuple(out.shape) != tuple(ref.shape):
        return f"output shape {tuple(out.shape)} != reference shape {tuple(ref.shape)}"
    eps = _precision(out)
    if eps == 0.0:
        bad = int((out != ref.to(device=out.device, dtype=out.dtype)).sum())
        return f"{bad}/{out.numel()} elements differ (integer output: exact match required)" if bad else None
    o, r = out.detach().double(), ref.detach().to(device=out.device).double()
    finite = torch.isfinite(o)
    if not finite.all():
        return f"output has {int((~finite).sum())} non-finite values"
    m = check_metrics(out, ref)
    err = (o - r).abs()
    bound = ulps * eps * r.abs().clamp_min(max(m["rms"], 1e-30)) + atol + rtol * r.abs()
    bad = err > bound
    if bad.any():
        return (
            f"{int(bad.sum())}/{bad.numel()} elements off by more than {ulps:g} ulps of {out.dtype} "
            f"(worst {m['max_ulps']:.3g} ulps, max abs err {float(err.max()):.4g}, rtol={rtol}, atol={atol})"
        )
    limit = max(eps * eps, rtol * rtol) if max_diff is None else max_diff
    if m["diff"] > limit:
        return f"output differs globally: diff {m['diff']:.3g} > {limit:.3g} (1 - cosine-like similarity)"
    return None


def compare_tensors(out: Any, ref: Any, rtol: float, atol: float) -> str | None:
    """The wave-1 check (``isclose`` in float32), kept to count what it rejected; kernels use
    ``compare_outputs``."""
    import torch

    if not isinstance(out, torch.Tensor):
        return f"output is {type(out).__name__}, not a tensor"
    if tuple(out.shape) != tuple(ref.shape):
        return f"output shape {tuple(out.shape)} != reference shape {tuple(ref.shape)}"
    # Compared where the output lives: copying a large GPU output to the host costs more than the check.
    o, r = out.detach().float(), ref.detach().to(device=out.device).float()
    if not torch.isfinite(o).all():
        return f"output has {int((~torch.isfinite(o)).sum())} non-finite values"
    bad = ~torch.isclose(o, r, rtol=rtol, atol=atol)
    if bad.any():
        err = (o - r).abs()
        return (
            f"{int(bad.sum())}/{bad.numel()} elements off (max abs err {float(err.max()):.4g}, "
            f"rtol={rtol}, atol={atol})"
        )
    return None


@dataclass
class LoadedKernel:
    """A kernel file after loading: the object, where it came from, and its resolved search space."""

    path: Path
    kernel: TunableKernel
    source_hash: str
    space_def: dict[str, Any]
    space_source: str
    shape_params: tuple[str, ...] = field(default=())

    @property
    def name(self) -> str:
        return self.kernel.name

    def default_shapes(self) -> list[Shape]:
        return [
            check_shape(s, self.shape_params, what=f"default shape {dict(s)}")
            for s in self.kernel.default_shapes
        ]

    def dtypes(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in (getattr(self.kernel, "dtypes", None) or {}).items()}

    def timed_kernels(self, config: Mapping[str, Any]) -> tuple[str, ...]:
        fn = getattr(self.kernel, "timed_kernels", None)
        names = fn(config) if callable(fn) else self.kernel.kernel_names
        return (names,) if isinstance(names, str) else tuple(names)

    def compare(self, out: Any, ref: Any) -> str | None:
        fn = getattr(self.kernel, "compare", None)
        if callable(fn):
            return fn(out, ref)
        k = self.kernel
        return compare_outputs(
            out,
            ref,
            ulps=getattr(k, "check_ulps", CHECK_ULPS),
            rtol=getattr(k, "rtol", 1e-2),
            atol=getattr(k, "atol", 1e-2),
            max_diff=getattr(k, "check_max_diff", None),
        )

    def flops(self, shape: Shape) -> float | None:
        """The kernel file's ``flops(shape)``, or None where it defines none (``OPTIONAL_HOOKS``)."""
        return self._hook("flops", shape)

    def bytes_moved(self, shape: Shape) -> float | None:
        """The kernel file's ``bytes_moved(shape)``, or None where it defines none."""
        return self._hook("bytes_moved", shape)

    def _hook(self, name: str, shape: Shape) -> float | None:
        fn = getattr(self.kernel, name, None)
        if not callable(fn):
            return None
        try:
            value = float(fn(dict(shape)))
        except NotImplementedError:
            return None
        except Exception as e:
            raise KernelHookError(
                f"{self.path.name}: {name}({dict(shape)}) raised {type(e).__name__}: {str(e)[:200]}"
                f" (optional: return a number, or leave it out and no {_HOOK_FIGURE[name]} is shown)"
            ) from None
        return value if value > 0 and math.isfinite(value) else None

    def meta(self) -> dict[str, Any]:
        """What the orchestrator needs to know about the kernel, as plain data (sent by the worker)."""
        return {
            "name": self.kernel.name,
            "path": str(self.path),
            "source_hash": self.source_hash,
            "space": self.space_def,
            "space_source": self.space_source,
            "default_config": dict(self.kernel.default_config),
            "default_shapes": self.default_shapes(),
            "shape_params": list(self.shape_params),
            "dtypes": self.dtypes(),
        }


def source_hash(path: str | os.PathLike[str]) -> str:
    """sha256 of a kernel file's bytes: part of every stored key, so an edit invalidates old results."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _import_file(path: Path):
    module_name = f"autotune_kernel_{hashlib.sha1(str(path).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise KernelFileError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    # Registered before exec so dataclasses / pickling inside the file can find their module.
    sys.modules[module_name] = module
    # A kernel file next to its helpers may import them.
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(module_name, None)
        raise KernelFileError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from None
    except Exception as exc:
        sys.modules.pop(module_name, None)
        tb = traceback.extract_tb(exc.__traceback__)
        where = next((f"{path}:{f.lineno}" for f in reversed(tb) if Path(f.filename) == path), str(path))
        raise KernelFileError(
            f"{where}: importing the kernel file failed: {type(exc).__name__}: {exc}"
        ) from None
    finally:
        try:
            sys.path.remove(str(path.parent))
        except ValueError:
            pass
    return module


def resolve_space(kernel_path: Path, space: Any) -> tuple[dict[str, Any], str]:
    """Turn a kernel's ``space`` declaration into (definition mapping, where it came from)."""
    from autotune.space import load_space_dict

    if isinstance(space, Mapping):
        return dict(space), f"{kernel_path} (inline)"
    if not isinstance(space, str | os.PathLike) or not str(space):
        raise KernelFileError(f"{kernel_path}: KERNEL.space must be a space name, a YAML path or a mapping")
    text = str(space)
    if text.endswith((".yaml", ".yml")) or os.sep in text:
        candidate = (kernel_path.parent / text) if not os.path.isabs(text) else Path(text)
        candidates = [candidate]
    else:
        from autotune.space import default_space_dirs

        candidates = [d / f"{text}.yaml" for d in default_space_dirs(near=kernel_path)]
    for c in candidates:
        if c.is_file():
            return load_space_dict(c), str(c)
    looked = ", ".join(str(c) for c in candidates)
    raise KernelFileError(f"{kernel_path}: search space {text!r} not found (looked in {looked})")


def space_of_file(path: str) -> tuple[dict[str, Any], str]:
    """(the space mapping, where it came from) of a kernel file: what ``autotune space FILE.py`` shows."""
    loaded = load_kernel_file(path)
    return loaded.space_def, loaded.space_source


def load_kernel_file(path: str | os.PathLike[str]) -> LoadedKernel:
    """Import a kernel file by path and check it declares the contract. One clear error naming the file."""
    p = Path(path).expanduser()
    if not p.exists():
        raise KernelFileError(f"{p}: no such kernel file")
    if not p.is_file():
        raise KernelFileError(f"{p}: not a file")
    p = p.resolve()
    module = _import_file(p)
    kernel = getattr(module, "KERNEL", None)
    if kernel is None:
        raise KernelFileError(f"{p}: declares no KERNEL object (see docs/contract.md)")
    missing = [a for a in REQUIRED_ATTRIBUTES if not hasattr(kernel, a)]
    missing += [m for m in REQUIRED_METHODS if not callable(getattr(kernel, m, None))]
    if missing:
        raise KernelFileError(f"{p}: KERNEL lacks {', '.join(missing)}")
    if not isinstance(kernel.name, str) or not kernel.name.strip():
        raise KernelFileError(f"{p}: KERNEL.name must be a non-empty string")
    names = kernel.kernel_names
    if isinstance(names, str):
        names = (names,)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise KernelFileError(f"{p}: KERNEL.kernel_names must name at least one kernel to time")
    shape_params = tuple(str(s) for s in kernel.shape_params)
    if not shape_params:
        raise KernelFileError(f"{p}: KERNEL.shape_params must name the shape's dimensions")
    space_def, space_source = resolve_space(p, kernel.space)
    loaded = LoadedKernel(
        path=p,
        kernel=kernel,
        source_hash=source_hash(p),
        space_def=space_def,
        space_source=space_source,
        shape_params=shape_params,
    )
    try:
        loaded.default_shapes()
    except Exception as exc:
        raise KernelFileError(f"{p}: bad default_shapes: {exc}") from None
    return loaded
