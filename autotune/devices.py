"""Devices as values: ``cpu``, ``cuda`` (the default GPU), ``cuda:N``, and lists of them (``--devices``).

Parsing needs no torch: ``all`` is resolved by the first worker, which sees the GPUs (the orchestrator
never initializes CUDA)."""

from __future__ import annotations

from dataclasses import dataclass

from autotune.errors import SettingsError

ALL = "all"


@dataclass(frozen=True, order=True)
class Device:
    kind: str  # "cpu" | "cuda" | "sim"
    index: int | None = None

    def __str__(self) -> str:
        return self.kind if self.index is None else f"{self.kind}:{self.index}"

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    @classmethod
    def parse(cls, text: str) -> Device:
        t = text.strip().lower()
        kind, sep, idx = t.partition(":")
        if kind in ("cpu", "cuda", "sim") and not sep:
            return cls(kind)
        if kind in ("cuda", "sim") and idx.isdigit() and len(idx) <= 4:
            return cls(kind, int(idx))
        raise SettingsError(
            f"unknown device {text[:40]!r}: expected cpu, cuda, cuda:N, a list of them, or all"
        )


def parse_devices(text: str | None) -> tuple[Device, ...] | str:
    """``""`` -> () (auto), ``"all"`` -> ALL, else a tuple of distinct devices of one kind."""
    t = (text or "").strip()
    if not t:
        return ()
    if t.lower() == ALL:
        return ALL
    devices = tuple(Device.parse(p) for p in t.split(",") if p.strip())
    if len(set(devices)) != len(devices):
        raise SettingsError(f"--devices {t[:80]!r} names a device twice")
    if len({d.kind for d in devices}) > 1:
        raise SettingsError(f"--devices {t[:80]!r} mixes device kinds: time on GPUs or on the CPU, not both")
    if len(devices) > 1 and devices[0].kind == "cpu":
        raise SettingsError("--devices: the CPU is one device (several CPU timers would disturb each other)")
    if len(devices) > 1 and any(d.index is None for d in devices):
        raise SettingsError(f"--devices {t[:80]!r}: give indices when naming several GPUs (cuda:0,cuda:1)")
    return devices
