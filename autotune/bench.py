"""The L2-flushed Kineto bench: device time of one *named* kernel, read from torch.profiler.

Grown from DeepGEMM's ``bench_kineto`` (see the seed recipe), with its defects fixed:

- a name that matches nothing raises and lists the kernels that did run (cuBLASLt's FP8 GEMM is called
  ``nvjet_sm90_...``, so "gemm" silently matched nothing and timed 0);
- device times come from the profiler's raw Kineto events, never from the text table (whose layout
  changes across PyTorch versions and which dropped times of 1 s or more);
- the flush is sized from the device (2x L2 by default: the same kernel times as 8 GB on the H200 at a
  fraction of the wall time and memory), runs on every device the call uses, and is never counted;
- on a machine without a GPU the same call profiles CPU activity (``record_function`` ranges and aten
  ops), with a "flush" that writes a buffer twice the size of the last-level cache.

Knows nothing of Optuna or the database."""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from autotune.errors import AmbiguousKernelError, BenchError, KernelNotFoundError
from autotune.settings import nvidia_tools_active

#: CPU-side range the flush runs in; events inside it are never matched
_FLUSH_RANGE = "autotune::flush"
#: kernel names the flush (and the barrier's sleep) launch, learnt once per device by profiling them alone
_flush_kernel_names: dict[tuple[int, bool], frozenset[str]] = {}


@dataclass(frozen=True)
class KernelStats:
    """Per-launch device times of the kernels one name matched, over the measured window."""

    name: str
    matched: tuple[str, ...]
    times_s: tuple[float, ...]
    launches_per_call: float

    @property
    def mean_s(self) -> float:
        return statistics.fmean(self.times_s)

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)

    @property
    def min_s(self) -> float:
        return min(self.times_s)

    @property
    def max_s(self) -> float:
        return max(self.times_s)

    @property
    def spread(self) -> float:
        """(p90 - p10) / median of the per-launch times: robust to one straggler."""
        ts = sorted(self.times_s)
        if len(ts) < 2 or self.median_s == 0:
            return 0.0
        lo = ts[int(0.1 * (len(ts) - 1))]
        hi = ts[math.ceil(0.9 * (len(ts) - 1))]
        return (hi - lo) / self.median_s

    @property
    def per_call_s(self) -> float:
        """Median per-launch time times launches per call: this kernel's share of one call of ``fn``."""
        return self.median_s * self.launches_per_call


@dataclass(frozen=True)
class BenchResult:
    """What one ``bench_kineto_detailed`` call measured."""

    kernels: dict[str, KernelStats]
    measured: bool
    device: str
    num_tests: int
    flush_bytes: int
    devices: tuple[int, ...] = ()
    wall_s: float = 0.0
    seen: tuple[str, ...] = field(default=())

    @property
    def per_call_s(self) -> float:
        """Device time of one call of ``fn`` summed over the named kernels: the tuner's objective."""
        return sum(k.per_call_s for k in self.kernels.values())

    def mean_per_launch(self, name: str) -> float:
        """The seed's number: total matched device time / matched launches."""
        return self.kernels[name].mean_s


@contextlib.contextmanager
def _suppress_output(enabled: bool) -> Iterator[None]:
    """Silence Kineto's C++ chatter (it writes to fds 1 and 2 directly, below Python's sys.stdout)."""
    if not enabled:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)


def default_flush_bytes(device: str, device_index: int | None = None) -> int:
    """2x the L2 (GPU) or last-level cache (CPU); ``AUTOTUNE_FLUSH_BYTES`` overrides."""
    from autotune.settings import flush_bytes

    configured = flush_bytes()
    if configured is not None:
        return configured
    if device == "cuda":
        import torch

        props = torch.cuda.get_device_properties(
            device_index if device_index is not None else torch.cuda.current_device()
        )
        l2 = int(getattr(props, "L2_cache_size", 0)) or 64 * 1024 * 1024
        return 2 * l2
    from autotune.env import cpu_llc_bytes

    return 2 * cpu_llc_bytes()


class _Flusher:
    """Evicts caches before each call: a memset-like write of ``nbytes`` on every device used."""

    def __init__(self, device: str, devices: Sequence[int], nbytes: int | None):
        import torch

        self.device = device
        self.buffers = []
        self.nbytes = 0
        for d in devices if device == "cuda" else [None]:
            n = nbytes if nbytes is not None else default_flush_bytes(device, d)
            self.nbytes = max(self.nbytes, n)
            dev = torch.device("cuda", d) if device == "cuda" else torch.device("cpu")
            self.buffers.append(torch.empty(max(1, n // 4), dtype=torch.int32, device=dev))
        self._i = 0

    def __call__(self) -> None:
        import torch

        if self.device == "cuda":
            for buf in self.buffers:
                buf.zero_()
            # The flush must be done before fn's kernels start, even if fn launches on other streams.
            for buf in self.buffers:
                torch.cuda.synchronize(buf.device)
        else:
            self._i += 1
            with torch.profiler.record_function(_FLUSH_RANGE):
                for buf in self.buffers:
                    buf.fill_(self._i)


def _device_events(prof: Any, device: str) -> list[tuple[str, float, float, float]]:
    """(name, start_ns, end_ns, duration_s) of the activity we match against, from raw Kineto events."""
    from torch.autograd import DeviceType

    want = DeviceType.CUDA if device == "cuda" else DeviceType.CPU
    out = []
    for e in prof.profiler.kineto_results.events():
        if e.device_type() != want:
            continue
        name = e.name()
        if device == "cpu" and name.startswith("ProfilerStep"):
            continue
        out.append((name, float(e.start_ns()), float(e.end_ns()), e.duration_ns() * 1e-9))
    return out


def _device_indices(prof: Any) -> set[int]:
    from torch.autograd import DeviceType

    return {
        e.device_index() for e in prof.profiler.kineto_results.events() if e.device_type() == DeviceType.CUDA
    }


def _profile(device: str) -> Any:
    import torch

    activity = (
        torch.profiler.ProfilerActivity.CUDA if device == "cuda" else torch.profiler.ProfilerActivity.CPU
    )
    return torch.profiler.profile(
        activities=[activity], schedule=torch.profiler.schedule(wait=0, warmup=1, active=1, repeat=1)
    )


def _excluded_names(device: str, flusher: _Flusher, with_sleep: bool, suppress: bool) -> frozenset[str]:
    """Names of the kernels the flush itself (and the barrier's sleep) launch, so they are never counted."""
    if device != "cuda":
        return frozenset()
    import torch

    key = (torch.cuda.current_device(), with_sleep)
    if key not in _flush_kernel_names:
        with _suppress_output(suppress), _profile(device) as prof:
            for _ in range(2):
                flusher()
                if with_sleep:
                    torch.cuda._sleep(1000)
                torch.cuda.synchronize()
                prof.step()
        _flush_kernel_names[key] = frozenset(name for name, *_ in _device_events(prof, device))
    return _flush_kernel_names[key]


def _resolve_device(device: str | None) -> str:
    if device is None:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        return "cuda"
    if device != "cpu":
        raise BenchError(f"unknown bench device {device!r}: expected 'cuda', 'cuda:N' or 'cpu'")
    return device


def _sync(device: str, devices: Sequence[int]) -> None:
    if device == "cuda":
        import torch

        for d in devices:
            torch.cuda.synchronize(d)


def bench_kineto_detailed(
    fn: Callable[[], Any],
    kernel_names: str | Sequence[str],
    num_tests: int = 30,
    suppress_kineto_output: bool = False,
    trace_path: str | None = None,
    flush_l2: bool = True,
    with_multiple_kernels: bool = False,
    barrier: Callable[[], Any] | None = None,
    *,
    flush_bytes: int | None = None,
    device: str | None = None,
    devices: Sequence[int] | None = None,
) -> BenchResult:
    """Time the kernels named by ``kernel_names`` (substrings) when ``fn()`` runs, with full statistics.

    ``device`` is "cuda" (default when available) or "cpu"; ``devices`` the CUDA device indices whose L2
    is flushed (default: those the pre-warm call launched kernels on)."""
    names = (kernel_names,) if isinstance(kernel_names, str) else tuple(kernel_names)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise BenchError("kernel_names must be a non-empty string or a tuple of non-empty strings")
    if num_tests < 1:
        raise BenchError(f"num_tests must be at least 1 (got {num_tests})")
    dev = _resolve_device(device)
    if nvidia_tools_active():
        ones = {n: KernelStats(n, (), (1.0,), 1.0) for n in names}
        return BenchResult(ones, measured=False, device=dev, num_tests=num_tests, flush_bytes=0)

    import torch

    start = time.perf_counter()
    # Pre-warm outside profiling: first-call compilation, autotuning prints and lazy init stay out.
    fn()
    if dev == "cuda":
        if devices is None:
            devices = _devices_used(fn, dev, suppress_kineto_output)
        torch.cuda.synchronize()
    devices = tuple(devices or ())

    flusher = _Flusher(dev, devices, flush_bytes) if flush_l2 else None
    excluded = (
        _excluded_names(dev, flusher, barrier is not None, suppress_kineto_output) if flusher else frozenset()
    )
    with _suppress_output(suppress_kineto_output):
        prof = _profile_window(fn, dev, devices, flusher, barrier, num_tests)
        if trace_path is not None:
            prof.export_chrome_trace(trace_path)
    events, seen = _measured_events(prof, dev, excluded)
    stats = {
        name: _kernel_stats(name, events, seen, excluded, num_tests, with_multiple_kernels) for name in names
    }
    flush_n = flusher.nbytes if flusher else 0
    return BenchResult(stats, True, dev, num_tests, flush_n, devices, time.perf_counter() - start, seen)


def _devices_used(fn: Callable[[], Any], dev: str, suppress: bool) -> list[int]:
    """The CUDA devices ``fn`` launches kernels on (the current one, unless profiling shows others)."""
    import torch

    devices = [torch.cuda.current_device()]
    if torch.cuda.device_count() > 1:
        # Learn which GPUs fn really uses, so each one's L2 is flushed.
        with _suppress_output(suppress), _profile(dev) as prof:
            for _ in range(2):
                fn()
                torch.cuda.synchronize()
                prof.step()
        devices = sorted(_device_indices(prof)) or devices
    return devices


def _profile_window(
    fn: Callable[[], Any],
    dev: str,
    devices: Sequence[int],
    flusher: _Flusher | None,
    barrier: Callable[[], Any] | None,
    num_tests: int,
) -> Any:
    """The profiler after ``num_tests`` calls of ``fn`` (each after a flush, and the barrier if any)."""
    import torch

    prof = _profile(dev)
    with prof:
        # Round one is the profiler's warm-up step (discarded); round two is the measured window.
        for _ in range(2):
            for _ in range(num_tests):
                if flusher is not None:
                    flusher()
                if barrier is not None:
                    # Absorb CPU launch skew across ranks: every rank waits on the GPU, then meets.
                    torch.cuda._sleep(int(2e7))
                    barrier()
                fn()
            _sync(dev, devices)
            prof.step()
    return prof


def _measured_events(
    prof: Any, dev: str, excluded: frozenset[str]
) -> tuple[list[tuple[str, float, float, float]], tuple[str, ...]]:
    """The measured window's events, without the flush's, and the distinct names seen."""
    events = _device_events(prof, dev)
    if dev == "cpu":
        flush_ranges = [(s, e) for n, s, e, _ in events if n == _FLUSH_RANGE]
        events = [ev for ev in events if not any(s <= ev[1] and ev[2] <= e for s, e in flush_ranges)]
    events = [ev for ev in events if ev[0] not in excluded]
    seen = tuple(sorted({ev[0] for ev in events}))
    if not events:
        raise BenchError(
            f"the profiler recorded no {'GPU kernels' if dev == 'cuda' else 'CPU activity'} while fn ran "
            "(is the work on this device? is CUPTI available?)"
        )
    return events, seen


def _kernel_stats(
    name: str,
    events: list[tuple[str, float, float, float]],
    seen: tuple[str, ...],
    excluded: frozenset[str],
    num_tests: int,
    with_multiple_kernels: bool,
) -> KernelStats:
    """The launches ``name`` matches; an error when it matches none, or several kernels unasked."""
    hits = [ev for ev in events if name in ev[0]]
    matched = tuple(sorted({ev[0] for ev in hits}))
    if not hits:
        raise KernelNotFoundError(
            f"no kernel matching {name!r} ran; kernels seen: {_list_names(seen)}"
            + (" (the L2 flush's kernels are never matched)" if any(name in x for x in excluded) else "")
        )
    if len(matched) > 1 and not with_multiple_kernels:
        raise AmbiguousKernelError(
            f"{name!r} matches {len(matched)} distinct kernels: {_list_names(matched)}; "
            "use a more specific name or with_multiple_kernels=True"
        )
    return KernelStats(name, matched, tuple(ev[3] for ev in hits), len(hits) / num_tests)


def _list_names(names: Sequence[str], limit: int = 25) -> str:
    shown = [n if len(n) <= 120 else n[:117] + "..." for n in names[:limit]]
    more = f" ... and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(repr(n) for n in shown) + more


def bench_kineto(
    fn: Callable[[], Any],
    kernel_names: str | Sequence[str],
    num_tests: int = 30,
    suppress_kineto_output: bool = False,
    trace_path: str | None = None,
    flush_l2: bool = True,
    with_multiple_kernels: bool = False,
    barrier: Callable[[], Any] | None = None,
    *,
    flush_bytes: int | None = None,
    device: str | None = None,
) -> float | tuple[float, ...]:
    """Per-launch average device time in seconds of the kernel(s) named by ``kernel_names``.

    The seed recipe's semantics: a float for a str, a tuple for a tuple of names. Under
    ``AUTOTUNE_USE_NVIDIA_TOOLS`` / ``DG_USE_NVIDIA_TOOLS`` it returns placeholder 1s; use
    :func:`bench_kineto_detailed` to tell (``measured=False``) and for medians, spread and launches."""
    res = bench_kineto_detailed(
        fn,
        kernel_names,
        num_tests,
        suppress_kineto_output,
        trace_path,
        flush_l2,
        with_multiple_kernels,
        barrier,
        flush_bytes=flush_bytes,
        device=device,
    )
    if isinstance(kernel_names, str):
        return res.mean_per_launch(kernel_names)
    return tuple(res.mean_per_launch(n) for n in kernel_names)
