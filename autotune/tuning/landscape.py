"""Landscape files from the store: ``autotune landscape export`` writes the search trials of a database key
as a landscape (the format ``autotune replay`` reads). The landscape itself (``Landscape``, the file format,
``load_landscape``) is the simulated backend's: ``autotune.engine.simulated``; its names are re-exported
here for the callers of the wave-2 paths."""

from __future__ import annotations

from typing import Any

from autotune.engine.simulated import FORMAT, VERSION, Landscape, config_results, load_landscape
from autotune.errors import SettingsError
from autotune.space.space import Space
from autotune.trial import config_hash

#: the wave-2 name of ``Landscape``
LandscapeFile = Landscape

__all__ = [
    "FORMAT",
    "VERSION",
    "Landscape",
    "LandscapeFile",
    "config_results",
    "export_landscape",
    "load_landscape",
]


def export_landscape(store: Any, kernel: str, shape_key: str, device_name: str | None = None) -> Landscape:
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
    return Landscape(
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
