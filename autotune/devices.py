"""Devices as values: ``cpu``, ``cuda`` (the default GPU), ``cuda:N``, and lists of them (``--devices``).

Parsing needs no torch: ``all`` is resolved by the first worker, which sees the GPUs (the orchestrator
never initializes CUDA)."""

from __future__ import annotations

import math
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


# ------------------------------------------------------------------------------------------- device facts


@dataclass(frozen=True)
class GpuFacts:
    """What a GPU model brings to a kernel's speed, from its vendor's data sheet: the ``auto`` strategy's
    models take them as inputs, so results measured on other GPUs inform a new one by how alike they are.
    For a multi-die part (MI250X) the figures are one die's (one GCD: what a kernel launch sees)."""

    vendor: str  # "nvidia" | "amd"
    sm_count: int  # SMs (NVIDIA) or compute units (AMD)
    mem_bw_gbs: float  # DRAM bandwidth, GB/s
    l2_mb: float  # L2 (last-level on-die cache before DRAM; AMD's Infinity Cache not counted)
    smem_kb: float  # shared memory (LDS) per SM/CU, KiB
    warp_size: int  # warp / native wavefront size


#: the GPUs autotune has landscapes or results of, by the name torch reports (matched by ``gpu_facts``)
GPU_FACTS: dict[str, GpuFacts] = {
    "H200": GpuFacts("nvidia", 132, 4800, 50, 228, 32),
    "H100": GpuFacts("nvidia", 132, 3350, 50, 228, 32),
    "A100": GpuFacts("nvidia", 108, 2039, 40, 164, 32),
    "A6000": GpuFacts("nvidia", 84, 768, 6, 100, 32),
    "A4000": GpuFacts("nvidia", 48, 448, 4, 100, 32),
    "L40S": GpuFacts("nvidia", 142, 864, 96, 100, 32),
    "RTX 4090": GpuFacts("nvidia", 128, 1008, 72, 100, 32),
    "RTX 3090": GpuFacts("nvidia", 82, 936, 6, 100, 32),
    "RTX 2080 Ti": GpuFacts("nvidia", 68, 616, 5.5, 64, 32),
    "V100": GpuFacts("nvidia", 80, 900, 6, 96, 32),
    "MI300X": GpuFacts("amd", 304, 5300, 4, 64, 64),
    "MI250X": GpuFacts("amd", 110, 1638, 8, 64, 64),
    "MI210": GpuFacts("amd", 104, 1638, 8, 64, 64),
    "MI100": GpuFacts("amd", 120, 1229, 8, 64, 64),
    "MI50": GpuFacts("amd", 60, 1024, 4, 64, 64),
    "W7800": GpuFacts("amd", 70, 576, 6, 128, 32),
    "W6600": GpuFacts("amd", 28, 224, 2, 128, 32),
}

#: the model inputs ``device_features`` gives, in order
DEVICE_FEATURES = ("dev_amd", "dev_log2_sms", "dev_log2_bw", "dev_log2_l2", "dev_log2_smem", "dev_warp64")


def gpu_facts(name: str | None) -> GpuFacts | None:
    """The table's entry for a GPU name as reported ("NVIDIA H200", "AMD Instinct MI250X", "A4000"): the
    longest table name found in it as whole words (so "H100" never matches "H1000"), or None."""
    if not name:
        return None
    words = " " + " ".join(str(name).upper().replace("-", " ").replace("_", " ").split()) + " "
    hits = [k for k in GPU_FACTS if f" {k.upper()} " in words]
    return GPU_FACTS[max(hits, key=len)] if hits else None


def device_features(name: str | None, facts: dict[str, int] | None = None) -> dict[str, float] | None:
    """A GPU as model inputs (``DEVICE_FEATURES``, log2 scales: a factor matters, not a difference): from
    the table, else from the worker's measured facts (``sm_count``, ``l2_bytes``, ``smem_per_block``,
    ``warp_size``; bandwidth unknown), else None."""
    g = gpu_facts(name)
    if g is None and facts and facts.get("sm_count"):
        g = GpuFacts(
            "amd" if int(facts.get("warp_size", 32)) == 64 else "nvidia",
            int(facts["sm_count"]),
            float("nan"),
            facts.get("l2_bytes", 0) / 2**20 or float("nan"),
            facts.get("smem_per_block", 0) / 1024 or float("nan"),
            int(facts.get("warp_size", 32)),
        )
    if g is None:
        return None

    def lg(x: float) -> float:
        return math.log2(x) if x > 0 else math.nan

    return dict(
        zip(
            DEVICE_FEATURES,
            (
                float(g.vendor == "amd"),
                lg(g.sm_count),
                lg(g.mem_bw_gbs),
                lg(g.l2_mb),
                lg(g.smem_kb),
                float(g.warp_size == 64),
            ),
            strict=True,
        )
    )


def device_distance(a: dict[str, float] | None, b: dict[str, float] | None) -> float:
    """How unlike two GPUs are (0: the same model; a vendor or wavefront change counts like a factor 2 in
    every size); inf when either is unknown."""
    if a is None or b is None:
        return math.inf
    d = [a[k] - b[k] for k in DEVICE_FEATURES if math.isfinite(a[k]) and math.isfinite(b[k])]
    return math.sqrt(sum(x * x for x in d) / max(1, len(d)))
