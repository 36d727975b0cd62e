"""GPU clocks during a measurement: the SM clock's range and the throttle reasons, and re-taking a
measurement whose clock fell below a share of the device's maximum (nvbench's ``--throttle-threshold``,
``--throttle-recovery-delay``).

A ``ClockSource`` reads the current SM clock, the device's maximum SM clock and the throttle-reason bitmask.
The default source is NVML through ``nvidia-ml-py`` (``pynvml``, the ``gpu`` extra): optional, so on a
machine without it, or without a GPU, there is no source and a measurement's clock fields stay None.
``measure`` runs a measurement while a thread samples the source, and re-takes it (after a recovery delay,
at most ``retakes`` times) while its lowest clock is below ``threshold`` x the maximum; the last one is
kept then, flagged ``throttled``.

Imports nothing heavy: ``pynvml`` only when a source is asked for, never on the runtime lookup's path."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

log = logging.getLogger(__name__)
T = TypeVar("T")

#: NVML's clocks-event (throttle) reason bits (nvml.h ``nvmlClocksEventReason*``), named as stored.
#: ``gpu_idle`` is left out of what is recorded: the gaps between timed calls (the flush's synchronize)
#: read as idle and say nothing about the clock the kernel ran at.
THROTTLE_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
_IGNORED_REASONS = 0x1
#: seconds between two readings of the clock while a measurement runs (an NVML read costs microseconds)
SAMPLE_INTERVAL_S = 0.005


def reason_names(mask: int) -> tuple[str, ...]:
    """The names of the throttle reasons set in ``mask`` (``gpu_idle`` left out), in bit order."""
    return tuple(name for bit, name in THROTTLE_REASONS.items() if mask & bit and not bit & _IGNORED_REASONS)


@runtime_checkable
class ClockSource(Protocol):
    """What a measurement reads about the clock of the device it runs on."""

    def sm_clock_mhz(self) -> float:
        """The SM clock now."""
        ...

    def max_sm_clock_mhz(self) -> float:
        """The highest SM clock the device runs at (the base of the throttle threshold)."""
        ...

    def throttle_reasons(self) -> int:
        """The bitmask of reasons the clock is held below its maximum now (``THROTTLE_REASONS``)."""
        ...


class NvmlClocks:
    """A ``ClockSource`` over NVML for one GPU (a ``pynvml`` device handle)."""

    def __init__(self, nvml: Any, handle: Any) -> None:
        self._nvml = nvml
        self._handle = handle
        self._max = float(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM))

    def sm_clock_mhz(self) -> float:
        return float(self._nvml.nvmlDeviceGetClockInfo(self._handle, self._nvml.NVML_CLOCK_SM))

    def max_sm_clock_mhz(self) -> float:
        return self._max

    def throttle_reasons(self) -> int:
        nvml = self._nvml
        # renamed "clocks event reasons" in NVML 12.2; older bindings have only the throttle name
        read = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        read = read or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        return int(read(self._handle))


def nvml_source(device_index: int | None = None) -> ClockSource | None:
    """The NVML clock source of the current CUDA device of this process (or ``device_index``), or None
    without ``pynvml``, without NVML (no driver) or without a GPU: clocks are then not recorded.

    NVML numbers GPUs physically and ignores CUDA_VISIBLE_DEVICES, so the device is found by its UUID
    (or PCI bus id) as torch sees it."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        index = torch.cuda.current_device() if device_index is None else device_index
        props = torch.cuda.get_device_properties(index)
        pynvml.nvmlInit()
        return NvmlClocks(pynvml, _nvml_handle(pynvml, props, index))
    except Exception as exc:  # no driver, no permission, an old NVML: measure without clocks
        log.info("autotune: GPU clocks are not recorded (%s)", exc)
        return None


def _nvml_handle(nvml: Any, props: Any, index: int) -> Any:
    uuid = str(getattr(props, "uuid", "") or "")
    if uuid:
        for text in (uuid if uuid.startswith("GPU-") else f"GPU-{uuid}", uuid):
            try:
                return nvml.nvmlDeviceGetHandleByUUID(text)
            except Exception:
                continue
    bus = getattr(props, "pci_bus_id", None)
    if bus is not None:
        domain = getattr(props, "pci_domain_id", 0)
        device = getattr(props, "pci_device_id", 0)
        try:
            return nvml.nvmlDeviceGetHandleByPciBusId(f"{domain:08x}:{bus:02x}:{device:02x}.0")
        except Exception:
            pass
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    physical = int(visible[index]) if index < len(visible) and visible[index].isdigit() else index
    return nvml.nvmlDeviceGetHandleByIndex(physical)


@dataclass(frozen=True)
class Clocks:
    """The clocks of one kept measurement."""

    #: lowest and highest SM clock read while it ran (MHz)
    min_mhz: float
    max_mhz: float
    #: the device's maximum SM clock (MHz): the threshold's base
    limit_mhz: float
    #: throttle reasons seen while it ran (``reason_names``)
    reasons: tuple[str, ...]
    #: its lowest clock stayed below the threshold through every re-take
    throttled: bool
    #: measurements taken again because their clock was low (0: the first one was kept)
    retakes: int

    def fields(self) -> dict[str, Any]:
        """The ``TrialResult`` fields these clocks fill."""
        return {
            "clock_min_mhz": self.min_mhz,
            "clock_max_mhz": self.max_mhz,
            "clock_limit_mhz": self.limit_mhz,
            "throttle_reasons": ",".join(self.reasons),
            "throttled": self.throttled,
            "retakes": self.retakes,
        }


class _Sampler:
    """Reads the source when entered, every ``interval_s`` from a thread while inside, and when left."""

    def __init__(self, source: ClockSource, interval_s: float) -> None:
        self.source = source
        self.interval_s = interval_s
        self.readings: list[float] = []
        self.reasons = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def read(self) -> None:
        try:
            self.readings.append(float(self.source.sm_clock_mhz()))
            self.reasons |= int(self.source.throttle_reasons())
        except Exception:  # a failed read loses one reading, never the measurement
            pass

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.read()

    def __enter__(self) -> _Sampler:
        self.read()
        self._thread = threading.Thread(target=self._loop, name="autotune-clocks", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.read()


def measure(
    take: Callable[[], T],
    source: ClockSource | None,
    *,
    threshold: float,
    recovery_s: float,
    retakes: int,
    interval_s: float = SAMPLE_INTERVAL_S,
    sleep: Callable[[float], None] | None = None,
) -> tuple[T, Clocks | None]:
    """``take()``'s result and its clocks (None without a source). A measurement whose lowest SM clock is
    below ``threshold`` x the device's maximum is taken again after ``recovery_s``, at most ``retakes``
    times; the last one is kept then, ``throttled``. An exception of ``take`` propagates."""
    if source is None:
        return take(), None
    try:
        limit = float(source.max_sm_clock_mhz())
    except Exception:
        return take(), None
    attempt = 0
    while True:
        with _Sampler(source, interval_s) as s:
            value = take()
        if not s.readings:
            return value, None
        low = limit > 0 and min(s.readings) < threshold * limit
        if not low or attempt >= retakes:
            names = reason_names(s.reasons)
            return value, Clocks(min(s.readings), max(s.readings), limit, names, low, attempt)
        attempt += 1
        (sleep or time.sleep)(recovery_s)
