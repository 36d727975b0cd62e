"""autotune.bench on the CPU (real torch.profiler traces), plus GPU tests that skip without CUDA."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from autotune import bench
from autotune.bench import (
    CPU_FLUSH_CAP_BYTES,
    BenchResult,
    bench_kineto,
    bench_kineto_detailed,
    default_flush_bytes,
)
from autotune.env import cpu_llc_bytes
from autotune.errors import AmbiguousKernelError, BenchError, KernelNotFoundError

A = torch.randn(128, 128)


def two_ranges():
    with torch.profiler.record_function("alpha_kernel"):
        A @ A
    with torch.profiler.record_function("beta_kernel"):
        A @ A


def run(fn, names, **kw):
    kw.setdefault("device", "cpu")
    kw.setdefault("num_tests", 5)
    kw.setdefault("suppress_kineto_output", True)
    return bench_kineto(fn, names, **kw)


def test_str_gives_float_and_tuple_gives_tuple():
    t = run(two_ranges, "alpha_kernel")
    assert isinstance(t, float) and t > 0
    ts = run(two_ranges, ("alpha_kernel", "beta_kernel"))
    assert isinstance(ts, tuple) and len(ts) == 2 and all(x > 0 for x in ts)


def test_unknown_name_raises_and_lists_seen_kernels():
    with pytest.raises(KernelNotFoundError) as info:
        run(two_ranges, "gemm")
    msg = str(info.value)
    assert "'gemm'" in msg and "alpha_kernel" in msg and "beta_kernel" in msg


def test_ambiguous_name_raises_unless_multiple_allowed():
    with pytest.raises(AmbiguousKernelError) as info:
        run(two_ranges, "_kernel")
    assert "alpha_kernel" in str(info.value) and "beta_kernel" in str(info.value)
    res = bench_kineto_detailed(
        two_ranges,
        "_kernel",
        num_tests=4,
        device="cpu",
        with_multiple_kernels=True,
        suppress_kineto_output=True,
    )
    st = res.kernels["_kernel"]
    assert st.matched == ("alpha_kernel", "beta_kernel")
    assert st.launches_per_call == 2.0 and len(st.times_s) == 8


def test_launches_per_call_and_stats():
    def thrice():
        for _ in range(3):
            with torch.profiler.record_function("tri_kernel"):
                A @ A

    res = bench_kineto_detailed(thrice, "tri_kernel", num_tests=6, device="cpu", suppress_kineto_output=True)
    assert isinstance(res, BenchResult) and res.measured
    st = res.kernels["tri_kernel"]
    assert st.launches_per_call == 3.0 and len(st.times_s) == 18
    assert st.min_s <= st.median_s <= st.max_s
    assert res.per_call_s == pytest.approx(st.median_s * 3)
    assert st.spread >= 0


def test_flush_is_never_counted():
    def fills():
        with torch.profiler.record_function("filler"):
            A.fill_(1.0)

    res = bench_kineto_detailed(fills, "aten::fill_", num_tests=5, device="cpu", suppress_kineto_output=True)
    # the flush also runs aten::fill_ before every call; only fn's own fill is matched
    assert res.kernels["aten::fill_"].launches_per_call == 1.0
    assert res.flush_bytes == min(2 * cpu_llc_bytes(), CPU_FLUSH_CAP_BYTES)

    def nothing():
        with torch.profiler.record_function("idle"):
            pass

    with pytest.raises(KernelNotFoundError):
        run(nothing, "aten::fill_")


def test_flush_size_override(monkeypatch):
    monkeypatch.setenv("AUTOTUNE_FLUSH_BYTES", "4096")
    assert default_flush_bytes("cpu") == 4096
    res = bench_kineto_detailed(
        two_ranges, "alpha_kernel", num_tests=2, device="cpu", suppress_kineto_output=True
    )
    assert res.flush_bytes == 4096
    res = bench_kineto_detailed(
        two_ranges, "alpha_kernel", num_tests=2, device="cpu", flush_l2=False, suppress_kineto_output=True
    )
    assert res.flush_bytes == 0


def test_flush_default_is_capped_on_huge_caches_and_the_override_is_not(monkeypatch):
    import autotune.env

    monkeypatch.delenv("AUTOTUNE_FLUSH_BYTES", raising=False)
    # a VM that reports its host's whole L3 (480 MiB seen): 2x that before every call was most of the time
    monkeypatch.setattr(autotune.env, "cpu_llc_bytes", lambda: 480 * 1024 * 1024)
    assert default_flush_bytes("cpu") == CPU_FLUSH_CAP_BYTES
    monkeypatch.setattr(autotune.env, "cpu_llc_bytes", lambda: 8 * 1024 * 1024)
    assert default_flush_bytes("cpu") == 16 * 1024 * 1024
    monkeypatch.setenv("AUTOTUNE_FLUSH_BYTES", str(3 * CPU_FLUSH_CAP_BYTES))
    assert default_flush_bytes("cpu") == 3 * CPU_FLUSH_CAP_BYTES


def test_flush_buffer_is_allocated_once_per_process():
    def buffer_address():
        return bench._flush_buffers[("cpu", None)].data_ptr()

    run(two_ranges, "alpha_kernel", num_tests=2, flush_bytes=1 << 20)
    first = buffer_address()
    run(two_ranges, "alpha_kernel", num_tests=2, flush_bytes=1 << 20)
    assert buffer_address() == first
    # another size replaces it (never a second buffer beside it)
    run(two_ranges, "alpha_kernel", num_tests=2, flush_bytes=2 << 20)
    assert bench._flush_buffers[("cpu", None)].numel() * 4 == 2 << 20
    assert [k for k in bench._flush_buffers if k[0] == "cpu"] == [("cpu", None)]


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads the RSS from /proc")
@pytest.mark.parametrize("name", ["ops_kernel", "aten::add_"])
def test_memory_is_bounded_over_measurements(name):
    """A kernel of many small ops, timed 20 times with ever more ops (as a search's configs differ): the
    RSS after the 20th measurement stays near the RSS after the 2nd. Before, every measurement's profiler
    results stayed alive (freed only by a rare cyclic GC), so the RSS grew by gigabytes over a search."""
    x = torch.zeros(4)

    def ops(n):
        def fn():
            with torch.profiler.record_function("ops_kernel"):
                for _ in range(n):
                    x.add_(1.0)

        return fn

    rss = []
    for i in range(20):
        res = bench_kineto_detailed(
            ops(100 * (i + 1)),
            name,
            num_tests=5,
            device="cpu",
            flush_bytes=1 << 20,
            suppress_kineto_output=True,
        )
        assert res.kernels[name].launches_per_call == (1 if name == "ops_kernel" else 100 * (i + 1))
        rss.append(_rss_mib())
    assert rss[19] - rss[1] < 64, f"RSS (MiB) after each measurement: {[round(r) for r in rss]}"


def test_the_time_spans_all_the_work_of_a_call():
    """The time of a named range covers every op run inside it: twice the work is twice the launches, each
    one nested in the measured range (a structural check: the profiler's nesting, not a speed ratio)."""
    x, y = torch.randn(64, 64), torch.randn(64, 64)

    def work(n):
        def fn():
            with torch.profiler.record_function("work_kernel"):
                for _ in range(n):
                    torch.mm(x, y)

        return fn

    for n in (2, 4):
        res = bench_kineto_detailed(
            work(n), ("work_kernel", "aten::mm"), num_tests=5, device="cpu", suppress_kineto_output=True
        )
        outer, inner = res.kernels["work_kernel"], res.kernels["aten::mm"]
        assert outer.launches_per_call == 1.0 and len(outer.times_s) == 5
        assert inner.launches_per_call == n and len(inner.times_s) == 5 * n
        # each mm lies inside one measured range: together they cannot outlast the ranges
        assert 0 < sum(inner.times_s) <= sum(outer.times_s), (inner.times_s, outer.times_s)


def test_trace_export(tmp_path):
    path = tmp_path / "trace.json"
    run(two_ranges, "alpha_kernel", trace_path=str(path))
    trace = json.loads(path.read_text())
    names = {e.get("name") for e in trace["traceEvents"]}
    assert "alpha_kernel" in names


@pytest.mark.parametrize("var", ["AUTOTUNE_USE_NVIDIA_TOOLS", "DG_USE_NVIDIA_TOOLS"])
def test_nvidia_tools_short_circuit(monkeypatch, var):
    calls = []
    monkeypatch.setenv(var, "1")
    assert bench_kineto(lambda: calls.append(1), "x", device="cpu") == 1
    assert bench_kineto(lambda: calls.append(1), ("x", "y"), device="cpu") == (1, 1)
    res = bench_kineto_detailed(lambda: calls.append(1), "x", device="cpu")
    assert res.measured is False
    assert calls == []  # nothing ran under the external profiler
    monkeypatch.setenv(var, "0")
    assert bench_kineto_detailed(two_ranges, "alpha_kernel", num_tests=2, device="cpu").measured


def test_bad_arguments():
    with pytest.raises(BenchError):
        run(two_ranges, "alpha_kernel", num_tests=0)
    with pytest.raises(BenchError):
        run(two_ranges, ())
    with pytest.raises(BenchError):
        run(two_ranges, "alpha_kernel", device="tpu")


@pytest.mark.parametrize("warm", [None, 0, 1, 4])
def test_the_warm_up_calls_are_the_callers_and_stay_out_of_the_window(warm):
    calls = []

    def fn():
        calls.append(1)
        two_ranges()

    res = bench_kineto_detailed(
        fn, "alpha_kernel", num_tests=5, device="cpu", suppress_kineto_output=True, warm_up_calls=warm
    )
    expected_warm = bench._CPU_WARM_UP_CALLS if warm is None else warm
    assert len(calls) == 1 + expected_warm + 5  # the pre-warm call, the warm-up, the window
    assert res.kernels["alpha_kernel"].launches_per_call == 1.0  # only the window's calls are counted
    with pytest.raises(BenchError, match="warm_up_calls"):
        bench_kineto_detailed(fn, "alpha_kernel", num_tests=5, device="cpu", warm_up_calls=-1)


def test_a_raced_measurement_stops_after_its_first_calls_only_when_they_are_over_the_bound():
    """``race=(calls, bound)``: over the bound after ``calls`` timed calls, the window ends there (the result's
    ``num_tests`` says so); under it, the rest of ``num_tests`` are timed too, with no second warm-up, and
    the statistics cover all of them."""
    calls = []

    def fn():
        calls.append(1)
        two_ranges()

    kw = dict(num_tests=8, device="cpu", suppress_kineto_output=True, warm_up_calls=2)
    slow = bench_kineto_detailed(fn, "alpha_kernel", race=(3, 0.0), **kw)  # any time is over 0 s
    assert slow.num_tests == 3 and len(calls) == 1 + 2 + 3
    assert len(slow.kernels["alpha_kernel"].times_s) == 3
    assert slow.kernels["alpha_kernel"].launches_per_call == 1.0
    calls.clear()
    fast = bench_kineto_detailed(fn, "alpha_kernel", race=(3, 1e9), **kw)
    assert fast.num_tests == 8 and len(calls) == 1 + 2 + 3 + 5
    assert len(fast.kernels["alpha_kernel"].times_s) == 8
    assert fast.kernels["alpha_kernel"].launches_per_call == 1.0
    calls.clear()
    # race calls >= num_tests: one window
    assert bench_kineto_detailed(fn, "alpha_kernel", race=(20, 0.0), **kw).num_tests == 8
    with pytest.raises(BenchError, match="race calls"):
        bench_kineto_detailed(fn, "alpha_kernel", race=(0, 1.0), **kw)


def test_kineto_output_is_suppressed():
    code = textwrap.dedent(
        """
        import torch
        from autotune.bench import bench_kineto
        a = torch.randn(64, 64)
        def fn():
            with torch.profiler.record_function("k"):
                a @ a
        bench_kineto(fn, "k", num_tests=3, device="cpu", suppress_kineto_output={flag})
        print("END")
        """
    )
    quiet = subprocess.run(
        [sys.executable, "-c", code.format(flag=True)], capture_output=True, text=True, check=True
    )
    assert quiet.stdout.strip() == "END" and quiet.stderr.strip() == ""
    loud = subprocess.run(
        [sys.executable, "-c", code.format(flag=False)], capture_output=True, text=True, check=True
    )
    # this torch build's Kineto does print on its own; if a build ever stops, the quiet check above still holds
    assert (loud.stdout + loud.stderr).replace("END", "").strip() != ""


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.mark.gpu
@cuda
def test_gpu_named_kernel_and_flush_excluded():
    a = torch.randn(1024, 1024, device="cuda")
    t = bench_kineto(lambda: a @ a, "gemm", num_tests=5, suppress_kineto_output=True)
    assert t > 0
    with pytest.raises(KernelNotFoundError):
        bench_kineto(lambda: a @ a, "FillFunctor", num_tests=3, suppress_kineto_output=True)


@pytest.mark.gpu
@cuda
def test_gpu_barrier_path():
    a = torch.randn(512, 512, device="cuda")
    calls = []
    # cuBLAS may split this GEMM into a main and a split-K kernel: both match "gemm"
    res = bench_kineto_detailed(
        lambda: a @ a,
        "gemm",
        num_tests=3,
        barrier=lambda: calls.append(1),
        suppress_kineto_output=True,
        with_multiple_kernels=True,
    )
    assert len(calls) == 6 and res.kernels["gemm"].launches_per_call >= 1.0
    assert not any("spin" in n or "sleep" in n for n in res.kernels["gemm"].matched)
