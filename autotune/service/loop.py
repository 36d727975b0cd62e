"""The service: one warm ``Tuner`` per kernel file (timing workers and compile pool started once), a
heartbeat thread, and a loop that takes a request from the queue, tunes it with ``Tuner.search_shape`` (the
one search loop, its stopping rule and re-timed finalists: what ``autotune search`` runs) and marks it done.

Kernel files are only those given at start: a request names a kernel, never a path, and one for a kernel no
live service runs is refused. SIGTERM (or Ctrl-C) interrupts the search in flight: the search hands its
claims back (``ShapeSearch.run``), the request goes back to the queue, the row says ``stopped``, exit 0."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from autotune.errors import DatabaseUnreachableError, SettingsError, StoreError
from autotune.service.events import EventLog
from autotune.service.validate import Refusal, check_dtypes, checked_options, checked_shape
from autotune.settings import SearchSettings, ServeSettings
from autotune.shapes import Shape, format_shape
from autotune.store import Owner, Store, Work
from autotune.store.rows import dtypes_key
from autotune.trial import fmt_config, fmt_time
from autotune.tuning.shape_search import ShapeReport, report_dict

#: seconds between two passes refusing queued requests for kernels no live service runs
REFUSE_EVERY_S = 2.0


class ServiceStopping(BaseException):
    """Raised into the search in flight by SIGTERM: a BaseException, so that nothing on the way swallows
    it and the search hands its claims back as it does for Ctrl-C."""


class Service:
    def __init__(
        self,
        kernel_files: Sequence[Path],
        store: Store,
        settings: SearchSettings,
        serve: ServeSettings,
        log: EventLog,
    ) -> None:
        self.kernel_files = list(kernel_files)
        self.store = store
        self.settings = settings
        self.serve = serve
        self.log = log
        self.owner = Owner()
        #: kernel name -> its warm tuner
        self.tuners: dict[str, Any] = {}
        self.device_name = ""
        self.stop = threading.Event()
        #: what the heartbeat reports
        self.state = "starting"
        self.current: int | None = None
        self._in_search = False
        self._interrupted = False
        self._beats: threading.Thread | None = None
        self._listener: Any = None
        self._next_refusal = 0.0

    # ------------------------------------------------------------------ the whole life

    def run(self) -> None:
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        # SIGHUP's default ends the process: a `systemctl reload` must not (there is no job file to reload)
        previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, self._on_hangup)
        self.store.services.register(self.owner, devices=self.settings.devices or "default")
        self.log("starting", owner=self.owner.id, kernels=",".join(str(f) for f in self.kernel_files))
        try:
            self._start()
            self._beats = threading.Thread(target=self._beat_loop, name="autotune-serve-beat", daemon=True)
            self._beats.start()
            self._listener = _quietly(self.store.services.listen, self.log, "listen-failed")
            said = ""
            while not self.stop.is_set():
                try:
                    worked = self.step()
                    said = ""
                except StoreError as e:  # the database is away or refuses: say so once, keep trying
                    worked = False
                    if str(e) != said:
                        said = str(e)
                        self.log("database-failed", f"{e}; trying again every {self._poll_s()} s")
                if not worked:
                    self._idle()
        except ServiceStopping:
            pass
        finally:
            try:
                self._shutdown()
            finally:
                for s, handler in previous.items():
                    signal.signal(s, handler)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.stop.set()
        self.log("stopping", signal=signal.Signals(signum).name, request=self.current)
        if self._in_search and not self._interrupted:
            self._interrupted = True
            raise ServiceStopping()

    def _on_hangup(self, signum: int, frame: Any) -> None:
        self.log("reload", "nothing to reload: the service has no job file; kernel files load at start only")

    def _start(self) -> None:
        from autotune.tuning.tuner import Tuner

        for path in self.kernel_files:
            t0 = time.monotonic()
            tuner = Tuner(str(path), self.store, self.settings, wait_for_study=False)
            try:
                info = tuner.start()
            except BaseException:
                tuner.__exit__(None, None, None)
                raise
            name = info.meta.name
            if name in self.tuners:
                tuner.__exit__(None, None, None)
                raise SettingsError(f"--kernels: two files declare the kernel {name!r} ({path})")
            self.tuners[name] = tuner
            self.device_name = str(info.env.get("gpu_name", ""))
            devices = ",".join(i.device for i in tuner.infos)
            self.log(
                "ready", kernel=name, file=str(path), devices=devices, start_s=round(time.monotonic() - t0, 2)
            )
        kernels = [
            {
                "name": n,
                "source_hash": t.info.meta.source_hash,
                "shape_params": list(t.info.meta.shape_params),
            }
            for n, t in self.tuners.items()
        ]
        self.store.services.started(self.owner, device_name=self.device_name, kernels=kernels)
        self.state = "idle"
        self.log("serving", device=self.device_name, kernels=",".join(self.tuners), db=self.store.masked_url)

    def _idle(self) -> None:
        """Wait for work: a NOTIFY (Postgres) or the next poll, in slices of at most a second so that
        SIGTERM is seen at once."""
        deadline = time.monotonic() + self._poll_s()
        while not self.stop.is_set() and (left := deadline - time.monotonic()) > 0:
            if self._listener is None:
                self.stop.wait(min(left, 1.0))
                continue
            try:
                if self._listener.wait(min(left, 1.0)):
                    return
            except Exception as e:  # the connection broke: poll from now on
                self._listener.close()
                self._listener = None
                self.log("listen-failed", f"polling every {self._poll_s()} s: {e}")

    def _poll_s(self) -> float:
        return self.serve.poll_for(self._listener is not None)

    def _shutdown(self) -> None:
        """Hand back the request in flight and every claim, close the workers, say ``stopped``."""
        self.stop.set()
        if self._listener is not None:
            self._listener.close()
        if self._beats is not None:
            self._beats.join(timeout=5)
        services, claims = self.store.services, self.store.claims
        handed = _quietly(lambda: services.hand_back(self.owner), self.log) or 0
        for tuner in self.tuners.values():
            _quietly(lambda t=tuner: claims.release(t.owner), self.log)
        if handed:
            self.log("handed-back", requests=handed)
        for tuner in self.tuners.values():
            _quietly(lambda t=tuner: t.__exit__(None, None, None), self.log)
        _quietly(lambda: services.stopped(self.owner), self.log)
        self.log("stopped", owner=self.owner.id)

    # ------------------------------------------------------------------ heartbeats

    def _beat_loop(self) -> None:
        said = ""
        while not self.stop.wait(self.serve.beat_s):
            try:
                self.store.services.beat(
                    self.owner, state=self.state, request_id=self.current, lease_s=self.serve.lease_s
                )
                said = ""
            except Exception as e:  # the database is away: say so once, keep beating
                if str(e) != said:
                    said = str(e)
                    self.log("heartbeat-failed", str(e))

    # ------------------------------------------------------------------ one request

    def step(self) -> bool:
        """Refuse what nobody serves, take one request and work it; False when the queue had nothing."""
        services = self.store.services
        # refusing takes a write lock: not on every poll of an idle SQLite service (4 a second)
        refuse = time.monotonic() >= self._next_refusal
        if refuse:
            self._next_refusal = time.monotonic() + REFUSE_EVERY_S
        refused = (
            services.refuse_unserved(self.owner, self.device_name, lease_s=self.serve.lease_s)
            if refuse
            else []
        )
        for w in refused:
            self.log(
                "refused",
                "no service runs this kernel",
                request=w.id,
                kernel=w.kernel_name,
                shape=w.shape_key,
            )
        work = services.take(self.owner, list(self.tuners), self.device_name, lease_s=self.serve.lease_s)
        if work is None:
            return False
        self.current, self.state = work.id, "tuning"
        try:
            self._work(work)
        finally:
            self.current, self.state = None, "idle"
        return True

    def _work(self, work: Work) -> None:
        tuner = self.tuners[work.kernel_name]
        meta = tuner.info.meta
        try:
            shape = checked_shape(work.dims, meta.shape_params)
            check_dtypes(work.dtypes_key, dtypes_key(meta.dtypes))
            options = checked_options(work.options)
        except Refusal as e:
            self._finish(work, "refused", str(e))
            return
        shape_key = format_shape(shape)
        tuned = [
            r
            for r in self.store.trials.best(meta.name, shape_key, self.device_name)
            if r.source_hash == meta.source_hash
        ]
        if tuned and options is None:  # a miss or request already served; a handed-over search runs
            self._finish(
                work, "done", f"already tuned: {fmt_config(tuned[0].config)} {fmt_time(tuned[0].time_s)}"
            )
            return
        self.log("tuning", request=work.id, kernel=meta.name, shape=shape_key)
        t0 = time.monotonic()
        try:
            self._in_search = True
            if self.stop.is_set():
                raise ServiceStopping()
            report = self._search(tuner, shape, options)
        except DatabaseUnreachableError as e:  # the database's fault, not the request's: queued again
            self._in_search = False
            self.log("failed", str(e), request=work.id)
            _quietly(lambda: self.store.services.hand_back(self.owner), self.log)
            return
        except Exception as e:
            self._in_search = False
            self._finish(work, "refused", f"the search failed: {e}")
            return
        finally:
            self._in_search = False
        best = report.best
        message = (
            f"best {fmt_config(best.config)} {fmt_time(best.time_s)} after {report.evaluations} evaluations"
            if best is not None
            else f"no config ran correctly in {report.evaluations} evaluations"
        )
        self._finish(work, "done", message, report_dict(report), search_s=round(time.monotonic() - t0, 2))

    @staticmethod
    def _search(tuner: Any, shape: Shape, options: dict[str, Any] | None) -> ShapeReport:
        """The one search loop (``Tuner.search_shape``), under a handed-over search's budget if any."""
        if options is None:
            return tuner.search_shape(shape)
        base = tuner.settings
        tuner.settings = replace(base, **options)
        try:
            return tuner.search_shape(shape)
        finally:
            tuner.settings = base

    def _finish(
        self, work: Work, status: str, message: str, report: dict[str, Any] | None = None, **fields: Any
    ) -> None:
        ours = self.store.services.finish(work.id, self.owner, status, message, report)
        event = "tuned" if status == "done" else "refused"
        if not ours:
            message += " (its lease had expired: another service took it over)"
        self.log(event, message, request=work.id, kernel=work.kernel_name, shape=work.shape_key, **fields)


def _quietly(fn: Any, log: EventLog, event: str = "shutdown-step-failed") -> Any:
    """Shutdown steps each run even when one fails (the database may be the reason for stopping)."""
    try:
        return fn()
    except Exception as e:
        log(event, str(e))
        return None
