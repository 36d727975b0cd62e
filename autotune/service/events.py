"""The service's log: one line per event on stderr, ``key=value`` text or one JSON object per line
(``--log-format json``, for log collectors)."""

from __future__ import annotations

import json
import logging
import sys
import threading
import warnings
from datetime import datetime, timezone
from typing import Any, TextIO

FORMATS = ("text", "json")
#: a field is cut to this many characters: a hostile request's values must not flood the log
MAX_FIELD = 200


def _short(value: Any) -> Any:
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    text = _printable(str(value))
    return text if len(text) <= MAX_FIELD else text[: MAX_FIELD - 3] + "..."


def _printable(text: str) -> str:
    """Control and bidi-override characters escaped (``\\x1b``, ``\\u202e``): a request's name must not
    move a terminal's cursor or reverse the text an operator reads in the log."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class EventLog:
    """Writes events; thread-safe (the heartbeat thread logs too)."""

    def __init__(self, fmt: str = "text", stream: TextIO | None = None) -> None:
        assert fmt in FORMATS
        self.fmt = fmt
        self.stream = stream or sys.stderr
        self._lock = threading.Lock()

    def capture_logging(self) -> None:
        """Python logging and warnings (autotune's loggers, SQLAlchemy's, torch's) written as events of this
        log (``log``, ``warning``): one format, no plain line in a JSON log."""
        root = logging.getLogger()
        root.handlers[:] = [_Forward(self)]  # the CLI's plain stderr handler (logging.basicConfig) goes
        if root.level == logging.NOTSET or root.level > logging.WARNING:
            root.setLevel(logging.WARNING)

        def show(
            message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None
        ) -> None:
            self("warning", str(message), category=category.__name__, where=f"{filename}:{lineno}")

        warnings.showwarning = show

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


class _Forward(logging.Handler):
    def __init__(self, log: EventLog) -> None:
        super().__init__(logging.WARNING)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.log("log", record.getMessage(), level=record.levelname.lower(), logger=record.name)
        except Exception:
            self.handleError(record)
