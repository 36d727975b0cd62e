"""The L2-flushed Kineto bench: device time of one *named* kernel, read from torch.profiler.

Grown from DeepGEMM's ``bench_kineto`` (see the seed recipe), with its defects fixed:

- a name that matches nothing raises and lists the kernels that did run (cuBLASLt's FP8 GEMM is called
  ``nvjet_sm90_...``, so "gemm" silently matched nothing and timed 0);
- device times come from the profiler's raw Kineto events, never from the text table (whose layout
  changes across PyTorch versions and which dropped times of 1 s or more);
- the flush is sized from the device (2x L2 by default: the same kernel times as 8 GB on the H200 at a
  fraction of the wall time and memory), runs on every device the call uses, and is never counted;
- on a machine without a GPU the same call profiles CPU activity (``record_function`` ranges and aten
  ops), with a "flush" that writes a buffer twice the size of the last-level cache (at most
  ``CPU_FLUSH_CAP_BYTES``);
- memory stays bounded over any number of measurements: the flush buffer is allocated once per device and
  process, only the numbers needed leave the profiler's results, which are freed (and their heap handed
  back to the OS) before the call returns; on the CPU only ``record_function`` ranges are recorded unless a
  name needs the aten ops (recording every op of a kernel made of thousands of small ops cost gigabytes and
  slowed it several times), and the unrecorded warm-up before the window is a few calls, not a round.

Knows nothing of Optuna or the database."""

from __future__ import annotations

import bisect
import contextlib
import ctypes
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from autotune.errors import AmbiguousKernelError, BenchError, KernelNotFoundError
from autotune.settings import nvidia_tools_active

#: CPU-side range the flush runs in; events inside it are never matched
_FLUSH_RANGE = "autotune::flush"
#: kernel names the flush (and the barrier's sleep) launch, learnt once per device by profiling them alone
_flush_kernel_names: dict[tuple[int, bool], frozenset[str]] = {}
#: ceiling of the CPU flush's default size. Some VMs report the whole host's (or every CCD's) L3 as the
#: last-level cache (480 MiB seen): 2x that wrote ~1 GB before every timed call, most of a measurement's
#: time. 128 MiB is still 2x a 64 MiB L3, and far more than the L1/L2 plus the share of L3 one core's
#: working set lives in on the larger parts; AUTOTUNE_FLUSH_BYTES asks for more where it matters.
CPU_FLUSH_CAP_BYTES = 128 * 1024 * 1024
#: the flush buffer of each (device type, CUDA index), allocated once per process and reused
_flush_buffers: dict[tuple[str, int | None], Any] = {}
#: seconds one flush takes, per (device type, CUDA index), measured once per process
_flush_seconds: dict[tuple[str, int | None], float] = {}
#: name tuples that matched no ``record_function`` range on the CPU (aten ops): measured recording every op
_op_level_names: set[tuple[str, ...]] = set()
#: unrecorded calls before the measured window on the CPU (see ``_Window.warm_up_calls``)
_CPU_WARM_UP_CALLS = 3
#: glibc's malloc_trim once looked up (False: this C library has none)
_malloc_trim: Any = None


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
    """2x the L2 (GPU) or last-level cache (CPU, at most ``CPU_FLUSH_CAP_BYTES``); ``AUTOTUNE_FLUSH_BYTES``
    overrides both."""
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

    return min(2 * cpu_llc_bytes(), CPU_FLUSH_CAP_BYTES)


def _flush_buffer(device: str, index: int | None, nbytes: int) -> Any:
    """This process's flush buffer for the device, re-allocated only when the size asked for changes."""
    import torch

    key = (device, index)
    buf = _flush_buffers.get(key)
    if buf is None or buf.numel() != max(1, nbytes // 4):
        _flush_buffers.pop(key, None)
        buf = None  # the old buffer is freed before the new one is allocated: never two at once
        dev = torch.device("cuda", index) if device == "cuda" else torch.device("cpu")
        buf = _flush_buffers[key] = torch.empty(max(1, nbytes // 4), dtype=torch.int32, device=dev)
    return buf


class _Flusher:
    """Evicts caches before each call: a memset-like write of ``nbytes`` on every device used, into this
    process's buffer for the device (allocated once, see ``_flush_buffer``)."""

    def __init__(self, device: str, devices: Sequence[int], nbytes: int | None):
        self.device = device
        self.buffers = []
        self.nbytes = 0
        for d in devices if device == "cuda" else [None]:
            n = nbytes if nbytes is not None else default_flush_bytes(device, d)
            self.nbytes = max(self.nbytes, n)
            self.buffers.append(_flush_buffer(device, d, n))
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


def flush_seconds(device: str = "cpu") -> float:
    """Seconds one default-size flush takes on ``device`` ("cpu", or "cuda": the current GPU), measured once
    per process on the buffer later measurements reuse: what a measurement spends beyond the calls it
    times (the worker adds it to the run timeout)."""
    import torch

    dev = _resolve_device(device)
    index = torch.cuda.current_device() if dev == "cuda" else None
    key = (dev, index)
    if key not in _flush_seconds:
        flusher = _Flusher(dev, [] if index is None else [index], None)
        samples = []
        for _ in range(3):
            t0 = time.perf_counter()
            flusher()
            samples.append(time.perf_counter() - t0)
        _flush_seconds[key] = statistics.median(samples)
    return _flush_seconds[key]


def warm_up(device: str | None = None) -> float:
    """Pay a process's one-time costs of measuring now, before its first measurement: the device's
    initialization, the flush buffer (allocated and timed: ``flush_seconds``) and, on a GPU, the profiler's
    first session (CUPTI's start-up), recording one flush to learn its kernels' names. Later measurements in
    the process reuse all of it. A timing worker calls this while the compile pool compiles its first
    configs. Returns the seconds it took."""
    t0 = time.perf_counter()
    dev = _resolve_device(device)
    if nvidia_tools_active():  # the bench measures nothing under the tools: nothing to prepare
        return 0.0
    flush_seconds(dev)
    if dev == "cuda":
        import torch

        index = torch.cuda.current_device()
        _excluded_names(dev, _Flusher(dev, [index], None), False, True)
    else:
        with _suppress_output(True):
            _record(dev, True, None, lambda: None)
    return time.perf_counter() - t0


def _record(
    device: str, ranges_only: bool, warm_up: Callable[[], Any] | None, window: Callable[[], Any]
) -> Any:
    """Kineto's results of ``window()``, run after ``warm_up()`` with the profiler prepared but not recording
    (its start-up cost stays out: what ``torch.profiler.schedule(warmup=1, active=1)`` does). Through the
    bindings ``torch.profiler.profile`` uses, for their one option it lacks: ``ranges_only`` records only
    ``record_function`` ranges, not every op inside them. The caller copies out what it needs and drops
    the results: nothing here keeps them."""
    from torch._C._profiler import RecordScope, _ExperimentalConfig
    from torch.autograd import (
        ProfilerActivity,
        ProfilerConfig,
        ProfilerState,
        _disable_profiler,
        _enable_profiler,
        _prepare_profiler,
    )

    # On a GPU the CUDA activity alone: with the CPU's too, a process's first session took 4.5-5.6 s on the
    # H200 (0.04 s without), and the kernels' device times need nothing from the CPU side.
    activities = {ProfilerActivity.CUDA if device == "cuda" else ProfilerActivity.CPU}
    scopes = {RecordScope.USER_SCOPE} if ranges_only else set()
    config = ProfilerConfig(ProfilerState.KINETO, False, False, False, False, False, _ExperimentalConfig())
    _prepare_profiler(config, activities)
    enabled = False
    try:
        if warm_up is not None:
            warm_up()
        _enable_profiler(config, activities, scopes)
        enabled = True
        window()
    finally:
        if not enabled:  # a prepared session ends through enable + disable, as torch.profiler's does
            _enable_profiler(config, activities, scopes)
        results = _disable_profiler()
    return results


#: (name, start_ns, end_ns, duration_s) of one profiled event
Event = tuple[str, float, float, float]


def _window_events(
    results: Any, device: str, names: Sequence[str], excluded: frozenset[str]
) -> tuple[list[Event], tuple[str, ...]]:
    """The events some name in ``names`` matches, outside the flush's ranges and its kernels, and every
    distinct name seen there (for the errors): copied out, so the profiler's results can be freed."""
    from torch.autograd import DeviceType

    want = DeviceType.CUDA if device == "cuda" else DeviceType.CPU
    events = [e for e in results.events() if e.device_type() == want]
    flush = sorted((e.start_ns(), e.end_ns()) for e in events if e.name() == _FLUSH_RANGE)
    starts = [s for s, _ in flush]
    hits: list[Event] = []
    seen: set[str] = set()
    for e in events:
        name = e.name()
        if name == _FLUSH_RANGE or name in excluded:
            continue
        start, end = e.start_ns(), e.end_ns()
        i = bisect.bisect_right(starts, start) - 1
        if i >= 0 and end <= flush[i][1]:
            continue  # inside a flush (the flush ranges are disjoint: the one starting last before it)
        seen.add(name)
        if any(n in name for n in names):
            hits.append((name, float(start), float(end), e.duration_ns() * 1e-9))
    return hits, tuple(sorted(seen))


def _release_heap() -> None:
    """Hand freed heap back to the OS. Without it glibc keeps the pages of the millions of small blocks an
    op-level profile frees, and a worker's RSS ratchets up by gigabytes over a search."""
    global _malloc_trim
    if _malloc_trim is None:
        try:
            _malloc_trim = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError, TypeError):  # not glibc: nothing to trim with
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)


def _device_indices(results: Any) -> set[int]:
    from torch.autograd import DeviceType

    return {e.device_index() for e in results.events() if e.device_type() == DeviceType.CUDA}


def _excluded_names(device: str, flusher: _Flusher, with_sleep: bool, suppress: bool) -> frozenset[str]:
    """Names of the kernels the flush itself (and the barrier's sleep) launch, so they are never counted."""
    if device != "cuda":
        return frozenset()
    import torch

    key = (torch.cuda.current_device(), with_sleep)
    if key not in _flush_kernel_names:

        def flush() -> None:
            flusher()
            if with_sleep:
                torch.cuda._sleep(1000)
            torch.cuda.synchronize()

        with _suppress_output(suppress):
            results = _record(device, False, flush, flush)
        from torch.autograd import DeviceType

        _flush_kernel_names[key] = frozenset(
            e.name() for e in results.events() if e.device_type() == DeviceType.CUDA
        )
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


def _checked_arguments(
    kernel_names: str | Sequence[str],
    num_tests: int,
    warm_up_calls: int | None,
    race: tuple[int, float] | None,
) -> tuple[str, ...]:
    """The kernel names as a tuple; a ``BenchError`` for an argument out of range."""
    names = (kernel_names,) if isinstance(kernel_names, str) else tuple(kernel_names)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise BenchError("kernel_names must be a non-empty string or a tuple of non-empty strings")
    if num_tests < 1:
        raise BenchError(f"num_tests must be at least 1 (got {num_tests})")
    if warm_up_calls is not None and warm_up_calls < 0:
        raise BenchError(f"warm_up_calls must be at least 0 (got {warm_up_calls})")
    if race is not None and race[0] < 1:
        raise BenchError(f"race calls must be at least 1 (got {race[0]})")
    return names


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
    warm_up_calls: int | None = None,
    race: tuple[int, float] | None = None,
) -> BenchResult:
    """Time the kernels named by ``kernel_names`` (substrings) when ``fn()`` runs, with full statistics.

    ``device`` is "cuda" (default when available) or "cpu"; ``devices`` the CUDA device indices whose L2
    is flushed (default: those the pre-warm call launched kernels on); ``warm_up_calls`` the unrecorded calls
    before the timed ones (default: ``_Window.warm_up_calls``, the seed recipe's whole round on a GPU).
    ``race=(calls, bound_s)``: stop after ``calls`` timed calls if they put ``fn`` over ``bound_s`` (it cannot be
    the best), else time the rest of ``num_tests`` right after, no warm-up (``_measure``); the result's
    ``num_tests`` is the calls timed. Not with ``trace_path`` (one window, one trace)."""
    names = _checked_arguments(kernel_names, num_tests, warm_up_calls, race)
    first = num_tests if race is None or trace_path is not None else min(num_tests, race[0])
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
    opening = _Window(fn, dev, devices, flusher, barrier, first, names, excluded, warm_up_calls)
    with _suppress_output(suppress_kineto_output):
        stats, seen, timed = _measure(opening, num_tests, race, trace_path, with_multiple_kernels)
    flush_n = flusher.nbytes if flusher else 0
    return BenchResult(stats, True, dev, timed, flush_n, devices, time.perf_counter() - start, seen)


def _measure(
    opening: _Window,
    num_tests: int,
    race: tuple[int, float] | None,
    trace_path: str | None,
    with_multiple_kernels: bool,
) -> tuple[dict[str, KernelStats], tuple[str, ...], int]:
    """The named kernels' statistics, the names seen and the calls timed: ``opening``'s calls, then (unless
    ``race`` stops there) the rest of ``num_tests`` in a second window like it, without warm-up."""
    first = opening.num_tests
    events, seen = opening.measure(trace_path)
    if not seen:
        what = "GPU kernels" if opening.dev == "cuda" else "CPU activity"
        raise BenchError(
            f"the profiler recorded no {what} while fn ran (is the work on this device? is CUPTI available?)"
        )

    def stats_of(events: list[Event], seen: tuple[str, ...], timed: int) -> dict[str, KernelStats]:
        return {
            n: _kernel_stats(n, events, seen, opening.excluded, timed, with_multiple_kernels)
            for n in opening.names
        }

    stats, timed = stats_of(events, seen, first), first
    if race is not None and first < num_tests and sum(k.per_call_s for k in stats.values()) <= race[1]:
        more, also = replace(opening, num_tests=num_tests - first, warm_calls=0).measure(None)
        events, seen, timed = events + more, tuple(sorted({*seen, *also})), num_tests
        stats = stats_of(events, seen, timed)
    return stats, seen, timed


def _devices_used(fn: Callable[[], Any], dev: str, suppress: bool) -> list[int]:
    """The CUDA devices ``fn`` launches kernels on (the current one, unless profiling shows others)."""
    import torch

    devices = [torch.cuda.current_device()]
    if torch.cuda.device_count() > 1:
        # Learn which GPUs fn really uses, so each one's L2 is flushed.
        def call() -> None:
            fn()
            torch.cuda.synchronize()

        with _suppress_output(suppress):
            results = _record(dev, False, call, call)
        devices = sorted(_device_indices(results)) or devices
    return devices


@dataclass
class _Window:
    """The measured window of one ``bench_kineto_detailed`` call: ``num_tests`` calls of ``fn`` (each after
    a flush, and the barrier if any), after unrecorded warm-up calls (as many on a GPU, a few on the CPU:
    ``warm_up_calls``)."""

    fn: Callable[[], Any]
    dev: str
    devices: Sequence[int]
    flusher: _Flusher | None
    barrier: Callable[[], Any] | None
    num_tests: int
    names: tuple[str, ...]
    excluded: frozenset[str]
    #: the caller's count (None: the default below)
    warm_calls: int | None = None

    @property
    def warm_up_calls(self) -> int:
        """On a GPU a whole round, as the seed recipe: CUPTI's start-up and the clocks' ramp stay out of the
        window (a timing worker that measured a moment ago asks fewer: ``settings.WarmUp``). The CPU has
        neither, the pre-warm call took the kernel's first-call costs, and a round there was half of every
        measurement's time (each call after a flush of the last-level cache)."""
        if self.warm_calls is not None:
            return self.warm_calls
        return self.num_tests if self.dev == "cuda" else min(self.num_tests, _CPU_WARM_UP_CALLS)

    def warm_up(self) -> None:
        self.calls(self.warm_up_calls)

    def window(self) -> None:
        self.calls(self.num_tests)

    def calls(self, n: int) -> None:
        import torch

        for _ in range(n):
            if self.flusher is not None:
                self.flusher()
            if self.barrier is not None:
                # Absorb CPU launch skew across ranks: every rank waits on the GPU, then meets.
                torch.cuda._sleep(int(2e7))
                self.barrier()
            self.fn()
        _sync(self.dev, self.devices)

    def measure(self, trace_path: str | None) -> tuple[list[Event], tuple[str, ...]]:
        """The matched events and the names seen. On the CPU only ``record_function`` ranges are recorded
        first; a name that matched none of them (an aten op) is measured again recording every op, and
        those names go straight to that from then on."""
        ranges_only = self.dev == "cpu" and trace_path is None and self.names not in _op_level_names
        events, seen = self.record(ranges_only, trace_path)
        if ranges_only and not _all_matched(self.names, events):
            events, seen = self.record(False, None)
            if _all_matched(self.names, events):
                _op_level_names.add(self.names)
        return events, seen

    def record(self, ranges_only: bool, trace_path: str | None) -> tuple[list[Event], tuple[str, ...]]:
        results = _record(self.dev, ranges_only, self.warm_up, self.window)
        if trace_path is not None:
            results.save(trace_path)
        window = _window_events(results, self.dev, self.names, self.excluded)
        del results  # the profiler's events (gigabytes, with every op recorded) go before the heap is trimmed
        _release_heap()
        return window


def _all_matched(names: Sequence[str], events: list[Event]) -> bool:
    return all(any(n in ev[0] for ev in events) for n in names)


def _kernel_stats(
    name: str,
    events: list[Event],
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
