"""Landscape files: every config of a search space measured on one shape, for replaying strategies offline
(``autotune replay``) and as training data (``--preload``).

Format (JSON, one file per kernel x shape x device)::

    {
      "format": "autotune-landscape", "version": 1,
      "kernel": "gemm_fp8",                 # the kernel's stored name
      "device_name": "NVIDIA H200",         # GPU model (or cpu)
      "facts": {"sm_count": 132, ...},      # device facts the space's constraints use
      "shape": {"M": 64, "N": 2112, "K": 7168},
      "space": {...},                       # the search space, as in search_spaces/*.yaml (or "space_file":
                                            #   a path relative to this file)
      "space_hash": "...",                  # Space.hash() of it
      "default_config": {...},              # the kernel's default config (a search starts from it)
      "configs": [                          # every config measured (a replay of a config missing here
        {"config": {...}, "status": "ok",   #   answers launch_failed)
         "time_s": 4.5e-05, "error": null}, # status: ok | invalid | compile_failed | launch_failed |
        ...                                 #   wrong_result | timeout | crashed
      ]
    }

Extra keys are kept and ignored (bench/landscape.py adds cuBLASLt times and the check's metrics).
``autotune landscape export`` writes one from a database key (its search trials)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.errors import SettingsError
from autotune.shapes import format_shape
from autotune.space.space import Space
from autotune.trial import TrialResult, TrialStatus, config_hash

if TYPE_CHECKING:
    from autotune.store.protocols import StoreReader

FORMAT = "autotune-landscape"
VERSION = 1


@dataclass
class LandscapeFile:
    kernel: str
    device_name: str
    facts: dict[str, int]
    shape: dict[str, int]
    space: Space
    default_config: dict[str, Any] | None
    #: config hash -> result
    results: dict[str, TrialResult] = field(default_factory=dict)
    path: str = ""

    @property
    def shape_key(self) -> str:
        return format_shape(self.shape)

    @property
    def best_s(self) -> float:
        return min((r.time_s for r in self.results.values() if r.timed), default=math.inf)

    def answer(self, config: Mapping[str, Any]) -> TrialResult:
        rec = self.results.get(config_hash(dict(config)))
        if rec is None:
            return TrialResult(TrialStatus.LAUNCH_FAILED, dict(config), error="not in the landscape")
        return TrialResult(rec.status, dict(config), time_s=rec.time_s, error=rec.error)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "kernel": self.kernel,
            "device_name": self.device_name,
            "facts": dict(self.facts),
            "shape": dict(self.shape),
            "space": self.space.to_dict(),
            "space_hash": self.space.hash(),
            "default_config": self.default_config,
            "configs": [
                {"config": r.config, "status": r.status.value, "time_s": r.time_s, "error": r.error}
                for r in self.results.values()
            ],
        }


def config_results(configs: list[dict[str, Any]], space: Space) -> dict[str, TrialResult]:
    """A landscape file's ``configs`` entries as results by config hash (configs normalized in ``space``)."""
    results: dict[str, TrialResult] = {}
    for c in configs:
        cfg = space.normalize(c["config"])
        results[config_hash(cfg)] = TrialResult(
            TrialStatus(c["status"]),
            cfg,
            time_s=c.get("time_s"),
            tflops=c.get("tflops"),
            error=c.get("error"),
        )
    return results


def load_landscape(path: str | Path) -> LandscapeFile:
    """Read and check one landscape file; a malformed one is a ``SettingsError`` naming it."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
        if doc.get("format", FORMAT) != FORMAT or int(doc.get("version", VERSION)) > VERSION:
            raise ValueError(f"not an {FORMAT} v{VERSION} file")
        if "space" in doc:
            space = Space.from_dict(doc["space"], source=f"{p}:space")
        elif "space_file" in doc:
            space = Space.from_yaml(p.parent / doc["space_file"])
        else:
            raise ValueError("no 'space' (or 'space_file')")
        shape = {str(k): int(v) for k, v in doc["shape"].items()}
        results = config_results(doc["configs"], space)
        default = doc.get("default_config")
        return LandscapeFile(
            kernel=str(doc["kernel"]),
            device_name=str(doc.get("device_name") or doc.get("gpu") or "unknown"),
            facts={str(k): int(v) for k, v in (doc.get("facts") or {}).items()},
            shape=shape,
            space=space,
            default_config=space.normalize(default) if default else None,
            results=results,
            path=str(p),
        )
    except SettingsError:
        raise
    except Exception as e:  # one line per bad file, whatever is wrong in it
        raise SettingsError(f"{p}: not a usable landscape file: {str(e)[:200]}") from None


def export_landscape(
    store: StoreReader, kernel: str, shape_key: str, device_name: str | None = None
) -> LandscapeFile:
    """The search trials of one key of ``kernel`` (the newest key for that shape and device) as a
    landscape. The device's facts are those recorded with its key's environment when present."""
    keys = [
        k
        for k in store.history.key_states(kernel)
        if k.shape_key == shape_key and (device_name is None or k.device_name == device_name)
    ]
    if not keys:
        raise SettingsError(
            f"no tuning key of {kernel!r} for shape {shape_key}"
            + (f" on {device_name}" if device_name else "")
        )
    k = keys[-1]
    space = Space.from_dict(store.keys.space(k.key_id), source=f"key {k.key_id}")
    results = {config_hash(res.config): res for res in store.trials.recorded(k.key_id)}
    return LandscapeFile(
        kernel=kernel,
        device_name=k.device_name,
        facts=_facts_for(k.device_name),
        shape=dict(k.dims),
        space=space,
        default_config=None,
        results=results,
    )


def _facts_for(device_name: str) -> dict[str, int]:
    """Device facts are not stored with a key: those of a known model (``DEVICE_PRESETS``), else none."""
    from autotune.env import DEVICE_PRESETS

    for name, facts in DEVICE_PRESETS.items():
        if name.lower() in device_name.lower().replace(" ", ""):
            return dict(facts)
    return {}
