"""The service's log: one line per event on stderr, ``key=value`` text or one JSON object per line
(``--log-format json``, for log collectors)."""

from __future__ import annotations

import json
import sys
import threading
from datetime import datetime, timezone
from typing import Any, TextIO

FORMATS = ("text", "json")
#: a field is cut to this many characters: a hostile request's values must not flood the log
MAX_FIELD = 200


def _short(value: Any) -> Any:
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    text = str(value)
    return text if len(text) <= MAX_FIELD else text[: MAX_FIELD - 3] + "..."


class EventLog:
    """Writes events; thread-safe (the heartbeat thread logs too)."""

    def __init__(self, fmt: str = "text", stream: TextIO | None = None) -> None:
        assert fmt in FORMATS
        self.fmt = fmt
        self.stream = stream or sys.stderr
        self._lock = threading.Lock()

    def __call__(self, event: str, message: str = "", **fields: Any) -> None:
        now = datetime.now(timezone.utc)
        values = {k: _short(v) for k, v in fields.items() if v is not None}
        if self.fmt == "json":
            record = {"ts": now.isoformat(timespec="milliseconds"), "event": event}
            if message:
                record["message"] = _short(message)
            line = json.dumps(record | values, default=str)
        else:
            parts = [now.strftime("%H:%M:%S"), f"serve {event}"]
            if message:
                parts.append(str(_short(message)))
            parts += [f"{k}={v}" for k, v in values.items()]
            line = " ".join(parts)
        with self._lock:
            self.stream.write(line.replace("\n", " ") + "\n")
            self.stream.flush()
