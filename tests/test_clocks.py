"""GPU clocks (autotune/clocks.py) on the CPU with a fake clock source: a throttled window then a recovered
one is re-taken and kept unflagged; a clock that never recovers is kept flagged after the re-takes; no
source, no clock fields; the settings; the fields reach the store."""

from __future__ import annotations

import pytest

from autotune import clocks
from autotune.errors import SettingsError
from autotune.settings import Throttle, throttle
from autotune.trial import TrialResult, TrialStatus


class FakeClocks:
    """A clock source in windows: ``windows[i]`` is (SM clock, throttle-reason bits) until the i-th recovery
    delay ends (the last window lasts): a throttled window, then a recovered one."""

    def __init__(self, windows: list[tuple[float, int]], limit: float = 1980.0) -> None:
        self.windows = windows
        self.limit = limit
        self.window = 0
        self.sleeps: list[float] = []

    def recover(self, seconds: float) -> None:
        """The recovery delay (instead of sleeping): the next window starts."""
        self.sleeps.append(seconds)
        self.window = min(self.window + 1, len(self.windows) - 1)

    def sm_clock_mhz(self) -> float:
        return self.windows[self.window][0]

    def max_sm_clock_mhz(self) -> float:
        return self.limit

    def throttle_reasons(self) -> int:
        return self.windows[self.window][1]


def run(source: FakeClocks, **kw):
    taken: list[int] = []

    def take() -> int:
        taken.append(source.window)
        return len(taken)

    settings = {"threshold": 0.75, "recovery_s": 0.05, "retakes": 3, **kw}
    value, c = clocks.measure(take, source, sleep=source.recover, interval_s=0.001, **settings)
    return value, c, source.sleeps


def test_a_throttled_window_is_retaken_after_the_recovery_delay_and_the_recovered_one_kept():
    power_cap = 0x4
    source = FakeClocks([(1100.0, power_cap), (1100.0, power_cap), (1965.0, 0)])
    value, c, sleeps = run(source)
    assert value == 3  # the third measurement is the one kept
    assert sleeps == [0.05, 0.05]
    assert c is not None and not c.throttled and c.retakes == 2
    assert c.min_mhz == c.max_mhz == 1965.0 and c.limit_mhz == 1980.0
    assert c.reasons == ()  # the kept measurement's own reasons


def test_a_clock_that_never_recovers_is_kept_flagged_after_the_retakes():
    source = FakeClocks([(900.0, 0x4 | 0x40 | 0x1)])
    value, c, sleeps = run(source, retakes=2, recovery_s=0.2)
    assert value == 3 and sleeps == [0.2, 0.2]
    assert c.throttled and c.retakes == 2
    assert c.reasons == ("sw_power_cap", "hw_thermal_slowdown")  # gpu_idle is not a cause
    fields = c.fields()
    assert fields["throttle_reasons"] == "sw_power_cap,hw_thermal_slowdown" and fields["throttled"] is True


def test_a_clock_at_the_threshold_is_not_throttled_and_zero_retakes_keeps_the_first():
    value, c, sleeps = run(FakeClocks([(0.75 * 1980.0, 0)]))
    assert value == 1 and sleeps == [] and not c.throttled and c.retakes == 0
    value, c, sleeps = run(FakeClocks([(500.0, 0x8)]), retakes=0)
    assert value == 1 and sleeps == [] and c.throttled and c.reasons == ("hw_slowdown",)


def test_min_and_max_cover_the_readings_inside_one_measurement():
    """A clock that dips during the measurement (read by the sampling thread) counts, not only its ends."""
    readings = iter([1900.0, 1200.0] + [1900.0] * 10_000)

    class Dipping(FakeClocks):
        def sm_clock_mhz(self) -> float:
            return next(readings)

    import threading

    seen = threading.Event()

    def take() -> str:
        seen.wait(5)  # the thread's reading (the dip) comes while the measurement runs
        return "done"

    source = Dipping([(0, 0)])
    original = clocks._Sampler._loop

    def loop(self):
        self.read()
        seen.set()
        original(self)

    clocks._Sampler._loop = loop
    try:
        value, c = clocks.measure(take, source, threshold=0.5, recovery_s=0, retakes=0, interval_s=1.0)
    finally:
        clocks._Sampler._loop = original
    assert value == "done" and c.min_mhz == 1200.0 and c.max_mhz == 1900.0 and not c.throttled


def test_without_a_source_the_measurement_runs_once_and_has_no_clocks():
    calls = []
    value, c = clocks.measure(lambda: calls.append(1) or 7, None, threshold=0.75, recovery_s=0, retakes=3)
    assert (value, c, calls) == (7, None, [1])


def test_a_source_that_fails_to_read_never_fails_the_measurement():
    class Broken(FakeClocks):
        def sm_clock_mhz(self) -> float:
            raise RuntimeError("NVML gone")

    value, c = clocks.measure(lambda: 1, Broken([(0, 0)]), threshold=0.75, recovery_s=0, retakes=3)
    assert (value, c) == (1, None)


def test_nvml_source_is_none_without_a_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert clocks.nvml_source() is None


def test_fake_is_a_clock_source():
    assert isinstance(FakeClocks([(1.0, 0)]), clocks.ClockSource)


def test_reason_names_follow_nvml_bits():
    assert clocks.reason_names(0) == ()
    assert clocks.reason_names(0x1) == ()
    assert clocks.reason_names(0x2 | 0x80 | 0x100) == (
        "applications_clocks_setting",
        "hw_power_brake_slowdown",
        "display_clock_setting",
    )


def test_throttle_settings(monkeypatch):
    assert throttle() == Throttle(0.75, 0.05, 3)
    monkeypatch.setenv("AUTOTUNE_THROTTLE_THRESHOLD", "0.9")
    monkeypatch.setenv("AUTOTUNE_THROTTLE_RECOVERY", "0.5")
    monkeypatch.setenv("AUTOTUNE_THROTTLE_RETAKES", "0")
    assert throttle() == Throttle(0.9, 0.5, 0)
    for name, bad in [
        ("AUTOTUNE_THROTTLE_THRESHOLD", "1.5"),
        ("AUTOTUNE_THROTTLE_THRESHOLD", "0"),
        ("AUTOTUNE_THROTTLE_RECOVERY", "-1"),
        ("AUTOTUNE_THROTTLE_RETAKES", "-1"),
        ("AUTOTUNE_THROTTLE_RETAKES", "two"),
    ]:
        monkeypatch.setenv(name, bad)
        with pytest.raises(SettingsError, match=name):
            throttle()
        monkeypatch.delenv(name)


def test_the_worker_records_the_clocks_of_its_measurement(monkeypatch):
    """The timing worker's hook: a throttled first window is re-taken and the result carries the fields."""
    from autotune.engine.worker import _Evaluation

    ev = _Evaluation.__new__(_Evaluation)
    source = FakeClocks([(1000.0, 0x4), (1900.0, 0x4)])
    ev._clocks = source
    monkeypatch.setattr(clocks.time, "sleep", source.recover)
    monkeypatch.setenv("AUTOTUNE_THROTTLE_RECOVERY", "0.3")
    bench, c = ev.timed(lambda: f"bench in window {source.window}")
    assert bench == "bench in window 1" and c.retakes == 1 and not c.throttled
    assert c.reasons == ("sw_power_cap",) and source.sleeps == [0.3]


def test_clock_fields_are_stored_and_read_back(store):
    from tests.test_store import ensure

    key = ensure(store)
    c = clocks.Clocks(1410.0, 1980.0, 1980.0, ("sw_power_cap",), True, 3)
    res = TrialResult(TrialStatus.OK, {"x": 1}, time_s=1e-5, **c.fields())
    store.trials.record(key.id, res)
    (back,) = store.trials.recorded(key.id)
    assert (back.clock_min_mhz, back.clock_max_mhz, back.clock_limit_mhz) == (1410.0, 1980.0, 1980.0)
    assert back.throttle_reasons == "sw_power_cap" and back.throttled is True and back.retakes == 3
    plain = TrialResult(TrialStatus.OK, {"x": 2}, time_s=1e-5)
    store.trials.record(key.id, plain)
    assert (
        store.trials.find(key.id, __import__("autotune.trial").trial.config_hash({"x": 2})).throttled is None
    )


class FakeNvml:
    """The pynvml calls NvmlClocks makes, answering for one GPU (old bindings: only the throttle name)."""

    NVML_CLOCK_SM = 1

    def __init__(self) -> None:
        self.clock = 1755
        self.handles: dict[str, str] = {"GPU-abc": "h0"}

    def nvmlDeviceGetMaxClockInfo(self, handle, kind):
        assert (handle, kind) == ("h0", 1)
        return 1980

    def nvmlDeviceGetClockInfo(self, handle, kind):
        assert (handle, kind) == ("h0", 1)
        return self.clock

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return 0x4 | 0x1

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return self.handles[uuid]

    def nvmlDeviceGetHandleByIndex(self, index):
        return f"index{index}"


def test_nvml_clocks_reads_the_sm_clock_its_maximum_and_the_reasons():
    nvml = FakeNvml()
    source = clocks.NvmlClocks(nvml, "h0")
    assert (source.sm_clock_mhz(), source.max_sm_clock_mhz(), source.throttle_reasons()) == (
        1755.0,
        1980.0,
        5,
    )
    value, c = clocks.measure(lambda: "t", source, threshold=0.75, recovery_s=0, retakes=3)
    assert c == clocks.Clocks(1755.0, 1755.0, 1980.0, ("sw_power_cap",), False, 0)


def test_the_nvml_device_is_found_by_torch_s_uuid_not_by_the_visible_index(monkeypatch):
    """NVML ignores CUDA_VISIBLE_DEVICES: cuda:0 of a worker isolated on GPU 3 is NVML's device 3."""
    from types import SimpleNamespace

    nvml = FakeNvml()
    assert clocks._nvml_handle(nvml, SimpleNamespace(uuid="abc"), 0) == "h0"  # torch's uuid lacks "GPU-"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert clocks._nvml_handle(nvml, SimpleNamespace(uuid="zzz"), 0) == "index3"
