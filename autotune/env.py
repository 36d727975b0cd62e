"""Environment fingerprint and device facts.

Everything that initializes CUDA lives in functions called by the worker, never at import time.
``device_facts`` feeds search-space constraints; ``environment`` becomes part of every stored key."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

#: facts a search-space constraint may use, with their meaning
FACT_NAMES = {
    "smem_per_block": "shared memory a block may opt into, bytes",
    "sm_count": "streaming multiprocessors (CPU: cores)",
    "l2_bytes": "L2 cache size, bytes (CPU: last-level cache)",
    "cc": "compute capability as an int, e.g. 90 (CPU: 0)",
    "cc_major": "compute capability major",
    "cc_minor": "compute capability minor",
    "warp_size": "threads per warp (CPU: 1)",
}

#: facts of devices we tune for, so spaces can be enumerated and checked on a machine without that GPU
DEVICE_PRESETS: dict[str, dict[str, int]] = {
    "h200": {
        "smem_per_block": 232448,
        "sm_count": 132,
        "l2_bytes": 60 * 1024 * 1024,
        "cc": 90,
        "cc_major": 9,
        "cc_minor": 0,
        "warp_size": 32,
    },
    "h100": {
        "smem_per_block": 232448,
        "sm_count": 132,
        "l2_bytes": 50 * 1024 * 1024,
        "cc": 90,
        "cc_major": 9,
        "cc_minor": 0,
        "warp_size": 32,
    },
}


def is_cuda_device(device: str) -> bool:
    return str(device).startswith("cuda")


def cpu_llc_bytes() -> int:
    """Size of the CPU's last-level cache (the CPU 'flush' writes twice this)."""
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in os.listdir(base):
            try:
                with open(os.path.join(base, entry, "size")) as f:
                    text = f.read().strip()
            except OSError:
                continue
            mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:].upper(), 1)
            num = text[:-1] if text[-1:].upper() in "KMG" else text
            best = max(best, int(num) * mult)
    except (OSError, ValueError):
        pass
    return best or 32 * 1024 * 1024


def device_facts(device: str) -> dict[str, int]:
    """Facts of ``device`` for constraints. Initializes CUDA for a CUDA device: call from the worker."""
    if is_cuda_device(device):
        import torch

        props = torch.cuda.get_device_properties(torch.device(device))
        smem = getattr(props, "shared_memory_per_block_optin", 0) or getattr(
            props, "shared_memory_per_block", 0
        )
        return {
            "smem_per_block": int(smem),
            "sm_count": int(props.multi_processor_count),
            "l2_bytes": int(getattr(props, "L2_cache_size", 0)),
            "cc": props.major * 10 + props.minor,
            "cc_major": int(props.major),
            "cc_minor": int(props.minor),
            "warp_size": int(getattr(props, "warp_size", 32)),
        }
    return {
        # a CPU "kernel" has no shared-memory limit; a large number keeps GPU constraints satisfiable
        "smem_per_block": 1 << 30,
        "sm_count": os.cpu_count() or 1,
        "l2_bytes": cpu_llc_bytes(),
        "cc": 0,
        "cc_major": 0,
        "cc_minor": 0,
        "warp_size": 1,
    }


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return "CPU " + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "CPU " + (platform.processor() or platform.machine())


@lru_cache(maxsize=8)
def current_device_name(device: str = "") -> str:
    """The stored device name for ``device`` ('' = cuda:current if CUDA is available, else cpu).

    Used by the runtime lookup, so it imports torch only if kernel code already did."""
    torch = sys.modules.get("torch")
    if not device:
        device = "cuda" if torch is not None and torch.cuda.is_available() else "cpu"
    if is_cuda_device(device):
        if torch is None:
            import torch
        return torch.cuda.get_device_name(torch.device(device))
    return cpu_name()


def _driver_version() -> str:
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:
        pass
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def software_versions() -> dict[str, str]:
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except Exception:
        triton_version = "none"
    return {
        "torch": torch.__version__.split("+")[0],
        "triton": triton_version,
        "cuda": torch.version.cuda or "none",
    }


def environment(device: str) -> dict[str, Any]:
    """The fingerprint stored with every trial. Initializes CUDA for a CUDA device: call from the worker."""
    env: dict[str, Any] = {"device_kind": "cuda" if is_cuda_device(device) else "cpu"}
    if is_cuda_device(device):
        import torch

        props = torch.cuda.get_device_properties(torch.device(device))
        env.update(
            gpu_name=props.name,
            cc=f"{props.major}.{props.minor}",
            sm_count=int(props.multi_processor_count),
            driver=_driver_version(),
        )
    else:
        env.update(gpu_name=cpu_name(), cc="cpu", sm_count=os.cpu_count() or 1, driver="none")
    env.update(software_versions())
    env["hostname"] = socket.gethostname()
    return env


#: fields that identify where a result is valid; hostname is provenance, not identity (a fleet of
#: identical machines shares results)
ENV_KEY_FIELDS = ("device_kind", "gpu_name", "cc", "sm_count", "driver", "cuda", "torch", "triton")


def env_hash(env: Mapping[str, Any]) -> str:
    ident = {k: str(env.get(k, "")) for k in ENV_KEY_FIELDS}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:32]
