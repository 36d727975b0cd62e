"""``autotune export --format triton``: the stored configs as ``triton.Config`` lists, per kernel, device and
shape (the best first, then the next fastest distinct ok configs), for ``@triton.autotune(configs=...)``.

A ``.py`` file defines ``CONFIGS`` and ``configs(kernel, shape=None, device=None)``; a ``.json`` file holds
the same as ``{"kwargs": ..., "num_warps": ..., "num_stages": ...}`` records (build ``triton.Config(**r)``)."""

from __future__ import annotations

import json
import pprint
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.errors import NotFoundError, SettingsError
from autotune.files import write_text
from autotune.space.triton import CONFIG_FIELDS

if TYPE_CHECKING:
    from autotune.store.protocols import StoreReader

#: ``triton.Config`` keyword arguments; every other param is a kernel meta-parameter (``kwargs``)
TRITON_OPTIONS = CONFIG_FIELDS
#: configs per shape: the best and the next fastest (``@triton.autotune`` then picks among them)
PER_SHAPE = 3
JSON_FORMAT = "autotune-triton-configs"


def triton_record(config: dict[str, Any]) -> dict[str, Any]:
    rec: dict[str, Any] = {"kwargs": {k: v for k, v in config.items() if k not in TRITON_OPTIONS}}
    rec.update({k: config[k] for k in TRITON_OPTIONS if k in config})
    return rec


def collect(store: StoreReader, kernel: str | None = None, per_shape: int = PER_SHAPE) -> dict[str, Any]:
    """{kernel: {device: {shape: [record, ...]}}} of every key with a best config (newest key wins)."""
    out: dict[str, Any] = {}
    for s in store.history.key_states(kernel):
        if s.best_config is None:
            continue
        timed = sorted((t for t in store.trials.recorded(s.key_id) if t.timed), key=lambda t: t.time_s)
        # the stored best first (the lowest median once finalists are re-timed), then by search time
        seen: list[dict[str, Any]] = [dict(s.best_config)]
        for t in timed:
            if t.config not in seen:
                seen.append(t.config)
            if len(seen) >= per_shape:
                break
        out.setdefault(s.kernel_name, {}).setdefault(s.device_name, {})[s.shape_key] = [
            triton_record(c) for c in seen
        ]
    return out


_LOADER = '''

def configs(kernel, shape=None, device=None):
    """triton.Config list of ``kernel``: one shape's ("M=64,N=2112,K=7168"), or every shape's, deduplicated;
    ``device``: a GPU name as stored (default: every device)."""
    found, seen = [], set()
    for dev, shapes in CONFIGS[kernel].items():
        if device is not None and dev != device:
            continue
        for key, records in shapes.items():
            if shape is not None and key != shape:
                continue
            for r in records:
                ident = repr(sorted(r["kwargs"].items())) + repr(sorted((k, v) for k, v in r.items() if k != "kwargs"))
                if ident not in seen:
                    seen.add(ident)
                    found.append(triton.Config(**r))
    return found
'''


def write_triton_configs(store: StoreReader, out_file: Path, *, kernel: str | None = None) -> int:
    """Write the file; returns the number of (kernel, device, shape) lists."""
    if out_file.suffix not in (".py", ".json"):
        raise SettingsError(f"{out_file}: a triton export is a .py or a .json file")
    data = collect(store, kernel)
    n = sum(len(shapes) for devs in data.values() for shapes in devs.values())
    if not n:
        raise NotFoundError(f"nothing tuned{f' for {kernel!r}' if kernel else ''} in {store.masked_url}")
    stamp = datetime.now(timezone.utc).isoformat()
    if out_file.suffix == ".json":
        text = json.dumps(
            {"format": JSON_FORMAT, "exported_at": stamp, "source": store.masked_url, "configs": data},
            indent=1,
        )
    else:
        # a Python literal (pprint of plain dicts, lists, strings, numbers, bools, None): importable as is
        body = pprint.pformat(data, indent=1, width=110, sort_dicts=False)
        text = (
            f'"""triton.Config lists written by `autotune export --format triton` from {store.masked_url} at '
            f'{stamp}.\n\n    @triton.autotune(configs=configs("KERNEL"), key=[...])\n"""\n\nimport triton\n\n'
            f"# kernel -> device -> shape -> triton.Config keyword arguments, fastest first\n"
            f"_RECORDS = {body}\n\n"
            "CONFIGS = _RECORDS\n" + _LOADER
        )
    write_text(out_file, text)
    return n
