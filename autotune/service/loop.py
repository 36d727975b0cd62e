"""The service: one warm ``Tuner`` per kernel file (timing workers and compile pool started once), a
heartbeat thread, and a loop that takes a request from the queue, tunes it with ``Tuner.search_shape`` (the
one search loop, its stopping rule and re-timed finalists: what ``autotune search`` runs) and marks it done.

Kernel files are only those given at start: a request names a kernel, never a path, and one for a kernel no
live service runs is refused. A request names the kernel's version too (its file's source hash, its space's
hash; "" for any): a service takes only requests its loaded file matches and leaves the others to a service
that runs their version. A file changed on disk is noticed and logged, never loaded behind the operator's
back (not even when workers restart): SIGHUP (``systemctl reload``) reads the kernel files, and the job file,
again, between two requests. SIGTERM (or Ctrl-C) interrupts the search in flight: the search hands its
claims back (``ShapeSearch.run``), the request goes back to the queue, the row says ``stopped``, exit 0.

With a job file (``--job``), the nightly job (``jobs.nightly.run_job``: plan, verify, search) runs on the
file's cron ``schedule:`` on the service's warm workers, between two requests."""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.engine import ShapeInputError
from autotune.errors import DatabaseUnreachableError, SettingsError, StoreError
from autotune.service.events import EventLog
from autotune.service.validate import Refusal, check_dtypes, checked_options, checked_shape
from autotune.settings import SearchSettings, ServeSettings
from autotune.shapes import Shape, format_shape
from autotune.store import Owner, Store, Version, Work
from autotune.store.rows import dtypes_key
from autotune.trial import fmt_config, fmt_time
from autotune.tuning.report import ShapeReport, report_dict

if TYPE_CHECKING:
    from autotune.jobs.nightly import Job, KernelJob

#: seconds between two passes refusing queued requests for kernels no live service runs
REFUSE_EVERY_S = 2.0
#: seconds between two looks at the kernel files' hashes (a changed file is logged, not loaded)
CHECK_FILES_EVERY_S = 5.0
#: seconds between two tries to LISTEN again after the listening connection broke (a Postgres restart)
RELISTEN_EVERY_S = 5.0


class DatabaseGone(StoreError):
    """The service's SQLite file was deleted or replaced under it: whatever it stored from now on would go
    to a file nobody reads (or be invisible in the new one). The service ends (exit 2): restart it."""


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
        job: Job | None = None,
        metrics_port: int | None = None,
        metrics_host: str = "",
    ) -> None:
        """``job``: a validated job file with a ``schedule`` (its kernel files are among ``kernel_files``);
        ``metrics_port``: serve ``/metrics``, ``/healthz`` and ``/readyz`` there (0: any free port)."""
        from autotune.service.metrics import Metrics

        self.metrics = Metrics()
        self.metrics_port, self.metrics_host = metrics_port, metrics_host
        self._metrics_server: Any = None
        #: monotonic time of the last heartbeat that reached the database (readiness)
        self._beat_ok = time.monotonic()
        self.kernel_files = list(kernel_files)
        self.store = store
        self.settings = settings
        self.serve = serve
        self.log = log
        self.owner = Owner()
        #: kernel name -> its warm tuner, and the file it came from
        self.tuners: dict[str, Any] = {}
        self.files: dict[str, Path] = {}
        self.job = job
        #: when the job runs next (None: no job)
        self.next_job: datetime | None = None
        self._reload = False
        #: the signal that stops the service, the request in flight then, and the signal watcher's socket pair
        self._signal: str | None = None
        self._stopped_request: int | None = None
        self._wakeup: tuple[socket.socket, socket.socket] | None = None
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
        self._next_listen = 0.0
        self._listen_failed = False
        self._next_file_check = 0.0
        #: path -> the source hash last said to differ from the loaded one (said once per change)
        self._changed: dict[Path, str] = {}

    # ------------------------------------------------------------------ the whole life

    def run(self) -> None:
        self._wakeup = socket.socketpair()
        self._wakeup[1].setblocking(False)
        previous_fd = signal.set_wakeup_fd(self._wakeup[1].fileno(), warn_on_full_buffer=False)
        threading.Thread(target=self._watch_signals, name="autotune-serve-signals", daemon=True).start()
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        # SIGHUP (`systemctl reload`): the job file is read again, between two requests; never the default
        # (which ends the process)
        previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, self._on_hangup)
        self.store.services.register(self.owner, devices=self.settings.devices or "default")
        self.log("starting", owner=self.owner.id, kernels=",".join(str(f) for f in self.kernel_files))
        try:
            self._serve_metrics()
            self._start()
            self._beats = threading.Thread(target=self._beat_loop, name="autotune-serve-beat", daemon=True)
            self._beats.start()
            self._listen()
            said = ""
            self._schedule()
            file_id = _sqlite_file_id(self.store)
            while not self._stopping():
                if _sqlite_file_id(self.store) != file_id:
                    raise DatabaseGone(
                        f"the SQLite file {self.store.db.sqlite_path} was deleted or replaced while the service "
                        "ran: stopping (restart the service on the database its clients use)"
                    )
                try:
                    if self._reload:
                        self._reload_all()
                    self._check_files()
                    worked = self._job_if_due() or self.step()
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
        except DatabaseGone as e:
            self.log("database-gone", str(e))
            raise
        finally:
            try:
                self._shutdown()
            finally:
                for s, handler in previous.items():
                    signal.signal(s, handler)
                signal.set_wakeup_fd(previous_fd)
                for sock in reversed(self._wakeup):  # the writing end first: the watcher's recv ends
                    sock.close()

    def _serve_metrics(self) -> None:
        if self.metrics_port is None:
            return
        from autotune.service.metrics import MetricsServer

        self._metrics_server = MetricsServer(self.metrics, self.health, self.metrics_host, self.metrics_port)
        self.log(
            "metrics",
            f"/metrics, /healthz, /readyz on port {self._metrics_server.port}",
            port=self._metrics_server.port,
        )

    def health(self) -> Any:
        """Liveness: the loop and the heartbeat thread run. Readiness: kernels loaded, and the last
        heartbeat reached the database within the lease."""
        from autotune.service.metrics import Health

        beats = self._beats is not None and self._beats.is_alive()
        live = not self.stop.is_set() and (beats or self.state == "starting")
        fresh = time.monotonic() - self._beat_ok < self.serve.lease_s
        ready = live and self.state in ("idle", "tuning") and bool(self.tuners) and fresh
        return Health(live, ready, self.state if fresh else f"{self.state}, database unreachable")

    def _on_signal(self, signum: int, frame: Any) -> None:
        # A handler runs in the main thread between two bytecodes, maybe while that thread holds a lock
        # the handler would take again (Event.set, a stream's write: a second SIGTERM, as `timeout` and a
        # terminal's Ctrl-C send, deadlocked there): plain attributes only. The watcher thread logs it
        # and wakes the loop (``_watch_signals``).
        if self._signal is None:
            self._signal = signal.Signals(signum).name
            self._stopped_request = self.current
            if self._in_search and not self._interrupted:
                self._interrupted = True
                raise ServiceStopping()

    def _on_hangup(self, signum: int, frame: Any) -> None:
        self._reload = True  # the files are read in the loop, after the work in flight

    def _watch_signals(self) -> None:
        """Wakes on every signal (``signal.set_wakeup_fd``): says a SIGHUP in the log; on SIGTERM/SIGINT
        sets ``stop`` (an idle loop and the heartbeat see it at once)."""
        assert self._wakeup is not None
        while True:
            try:
                data = self._wakeup[0].recv(64)
            except OSError:
                return
            if not data:
                return
            for signum in data:
                if signum == signal.SIGHUP:
                    self.log(
                        "reload",
                        "the kernel files"
                        + (" and the job file" if self.job is not None else "")
                        + " are read again after the work in flight",
                    )
                elif signum in (signal.SIGTERM, signal.SIGINT):
                    self.stop.set()  # "stopping" is said by the main thread (``_shutdown``), in order

    def _stopping(self) -> bool:
        return self._signal is not None or self.stop.is_set()

    def _start(self) -> None:
        for path in self.kernel_files:
            name, tuner = self._start_tuner(path)
            if name in self.tuners:
                tuner.__exit__(None, None, None)
                raise SettingsError(f"--kernels: two files declare the kernel {name!r} ({path})")
            self.tuners[name], self.files[name] = tuner, path
        self._announce()
        self.state = "idle"
        self.log("serving", device=self.device_name, kernels=",".join(self.tuners), db=self.store.masked_url)

    def _announce(self) -> None:
        """The service row says which kernel versions it serves (at start, after a reload or a drop)."""
        kernels = [
            {
                "name": n,
                "source_hash": t.info.meta.source_hash,
                "space_hash": t.space.hash(),
                "shape_params": list(t.info.meta.shape_params),
            }
            for n, t in self.tuners.items()
        ]
        self.store.services.started(self.owner, device_name=self.device_name, kernels=kernels)

    def versions(self) -> list[Version]:
        """The kernel versions loaded: the requests this service may take."""
        return [Version(n, t.info.meta.source_hash, t.space.hash()) for n, t in self.tuners.items()]

    def _start_tuner(self, path: Path) -> tuple[str, Any]:
        """A started ``Tuner`` of one kernel file (its timing and compile workers warm) and its kernel's name."""
        from autotune.tuning.tuner import Tuner

        t0 = time.monotonic()
        tuner = Tuner(str(path), self.store, self.settings, wait_for_study=False, long_lived=True)
        try:
            info = tuner.start()
        except BaseException:
            tuner.__exit__(None, None, None)
            raise
        self.device_name = str(info.env.get("gpu_name", ""))
        devices = ",".join(i.device for i in tuner.infos)
        name = info.meta.name
        self.log(
            "ready", kernel=name, file=str(path), devices=devices, start_s=round(time.monotonic() - t0, 2)
        )
        return name, tuner

    def _restart(self, name: str) -> bool:
        """New workers for a kernel whose workers are gone (a shape whose inputs could not be built ends
        them), from the same file if it is unchanged. A file changed (or half-written) on disk is not loaded
        behind the operator's back: the kernel is no longer served until SIGHUP, and the service goes on.
        False when the kernel was dropped."""
        old = self.tuners[name]
        _quietly(lambda: old.__exit__(None, None, None), self.log)
        path = self.files[name]
        if _hash_or_none(path) != old.info.meta.source_hash:
            del self.tuners[name], self.files[name]
            self.log(
                "kernel-dropped",
                "its file changed on disk since it was loaded: not served until a reload (SIGHUP)",
                kernel=name,
                file=str(path),
            )
            self._announce()
            return False
        self.tuners[name] = self._start_tuner(path)[1]
        return True

    def _restart_broken(self) -> None:
        for name, tuner in list(self.tuners.items()):
            if not tuner.broken or self._stopping():
                continue
            try:
                self._restart(name)
            except Exception as e:
                if self._stopping():
                    continue  # a SIGTERM to the whole group (systemd's default) killed the new workers
                # the unchanged file no longer starts (a device gone?): that kernel is not served, the rest is
                self.tuners.pop(name, None)
                self.files.pop(name, None)
                self.log("kernel-dropped", f"its workers do not start again: {e}", kernel=name)
                self._announce()

    # ------------------------------------------------------------------ files, reloads, LISTEN

    def _check_files(self) -> None:
        """Say once when a served kernel's file changed on disk: it is served as loaded until SIGHUP."""
        if time.monotonic() < self._next_file_check:
            return
        self._next_file_check = time.monotonic() + CHECK_FILES_EVERY_S
        for name, tuner in self.tuners.items():
            path, loaded = self.files[name], tuner.info.meta.source_hash
            now = _hash_or_none(path) or "missing"
            if now != loaded and self._changed.get(path) != now:
                self._changed[path] = now
                self.log(
                    "kernel-changed",
                    "the file changed on disk; the loaded version is served until a reload (SIGHUP)",
                    kernel=name,
                    file=str(path),
                    loaded=loaded[:12],
                    on_disk=now[:12],
                )

    def _reload_all(self) -> None:
        """SIGHUP: every kernel file whose hash changed (or whose kernel is not served) is loaded again on
        new workers; a file that no longer loads keeps the version served before (one line says why). Then
        the job file."""
        self._reload = False
        by_path = {p.resolve(): n for n, p in self.files.items()}
        before = dict(self.tuners)
        for path in self.kernel_files:
            name = by_path.get(path.resolve())
            tuner = self.tuners.get(name) if name is not None else None
            if tuner is not None and not tuner.broken and _hash_or_none(path) == tuner.info.meta.source_hash:
                continue
            try:
                new_name, new = self._start_tuner(path)
            except Exception as e:
                self.log("reload-failed", f"{e}; the version loaded before stays", file=str(path))
                continue
            if new_name != name and new_name in self.tuners:
                new.__exit__(None, None, None)
                self.log("reload-failed", f"a second file declares the kernel {new_name!r}", file=str(path))
                continue
            if tuner is not None and name is not None:
                _quietly(lambda t=tuner: t.__exit__(None, None, None), self.log)
                del self.tuners[name], self.files[name]
            self.tuners[new_name], self.files[new_name] = new, path
            self._changed.pop(path, None)
            self.log("reloaded", kernel=new_name, file=str(path), source_hash=new.info.meta.source_hash[:12])
        kept = sum(1 for n, t in self.tuners.items() if before.get(n) is t)
        self.log("reload-done", f"{len(self.tuners) - kept} kernel(s) loaded again, {kept} unchanged")
        self._announce()
        if self.job is not None:
            self._reload_job()

    def _listen(self) -> None:
        """LISTEN for queued work (Postgres); after a failure, tried again every ``RELISTEN_EVERY_S``."""
        self._next_listen = time.monotonic() + RELISTEN_EVERY_S
        try:
            self._listener = self.store.services.listen()
        except Exception as e:  # said once per outage, not every RELISTEN_EVERY_S
            if not self._listen_failed:
                self.log("listen-failed", f"polling every {self._poll_s()} s until it listens again: {e}")
            self._listen_failed, self._listener = True, None
        self.metrics.listening.set(self._listener is not None)
        if self._listener is not None:
            self._listen_failed = False
            self.log("listening", f"woken by NOTIFY; polling every {self._poll_s()} s")

    def _idle(self) -> None:
        """Wait for work: a NOTIFY (Postgres), the next poll or the job's time, in slices of at most a
        second so that SIGTERM and SIGHUP are seen at once."""
        deadline = time.monotonic() + self._poll_s()
        if self.next_job is not None:
            until_job = (self.next_job - datetime.now(timezone.utc)).total_seconds()
            deadline = min(deadline, time.monotonic() + max(0.0, until_job))
        while not self._stopping() and not self._reload and (left := deadline - time.monotonic()) > 0:
            if (
                self._listener is None
                and not self.store.db.is_sqlite
                and time.monotonic() >= self._next_listen
            ):
                self._listen()  # a Postgres restart broke it: listen again, else a 10 Hz poll for ever
                if self._listener is not None:
                    return  # what was queued meanwhile was never notified: look now
            if self._listener is None:
                self.stop.wait(min(left, 1.0))
                continue
            try:
                if self._listener.wait(min(left, 1.0)):
                    return
            except Exception as e:  # the connection broke: poll until it listens again
                self._listener.close()
                self._listener, self._listen_failed = None, True
                self.metrics.listening.set(0)
                self._next_listen = time.monotonic() + RELISTEN_EVERY_S
                self.log("listen-failed", f"polling every {self._poll_s()} s until it listens again: {e}")

    def _poll_s(self) -> float:
        return self.serve.poll_for(self._listener is not None)

    def _shutdown(self) -> None:
        """Hand back the request in flight and every claim, close the workers, say ``stopped``."""
        if self._signal is not None:
            self.log("stopping", signal=self._signal, request=self._stopped_request)
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
        if self._metrics_server is not None:
            _quietly(self._metrics_server.close, self.log)
        self.log("stopped", owner=self.owner.id)

    # ------------------------------------------------------------------ heartbeats

    def _beat_loop(self) -> None:
        said = ""
        while not self.stop.wait(self.serve.beat_s):
            try:
                self.store.services.beat(
                    self.owner, state=self.state, request_id=self.current, lease_s=self.serve.lease_s
                )
                self._beat_ok = time.monotonic()
                # the queue read only where something scrapes it: an idle service's cost stays one write
                queue = self.store.services.queue_counts() if self._metrics_server is not None else {}
                self.metrics.beat(queue)
                said = ""
            except Exception as e:  # the database is away: say so once, keep beating
                if str(e) != said:
                    said = str(e)
                    self.log("heartbeat-failed", str(e))

    # ------------------------------------------------------------------ one request

    def step(self) -> bool:
        """Refuse what nobody serves, take one request and work it; False when the queue had nothing."""
        services = self.store.services
        if not services.anything_to_do(self.owner, self.device_name):
            return False  # an idle poll: one read, no write
        # refusing takes a write lock: not on every poll of an idle SQLite service (10 a second)
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
                "no live service runs this kernel, or this version of it",
                request=w.id,
                kernel=w.kernel_name,
                shape=w.shape_key,
            )
        work = services.take(self.owner, self.versions(), self.device_name, lease_s=self.serve.lease_s)
        if work is None:
            return False
        self.current, self.state = work.id, "tuning"
        try:
            self._work(work)
        finally:
            self.current, self.state = None, "idle"
        self._restart_broken()
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
            if self._stopping():
                raise ServiceStopping()
            report = self._search(tuner, shape, options)
        except DatabaseUnreachableError as e:  # the database's fault, not the request's: queued again
            self._in_search = False
            self.log("failed", str(e), request=work.id)
            _quietly(lambda: self.store.services.hand_back(self.owner), self.log)
            self.metrics.requests.labels("handed_back").inc()
            return
        except ShapeInputError as e:  # production's data (N=10**13 cannot be allocated): refused
            self._in_search = False
            why = " ".join(str(e).split(" failed: ", 1)[-1].split())[:300]  # the cause, without the path
            self._finish(work, "refused", f"inputs cannot be built: {why}")
            return
        except Exception as e:
            self._in_search = False
            self._finish(work, "refused", f"the search failed: {e}")
            return
        finally:
            self._in_search = False
        self.metrics.searched(meta.name, time.monotonic() - t0, report.evaluations, report.statuses)
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
        with _settings(tuner, replace(tuner.settings, **(options or {}))):
            return tuner.search_shape(shape)

    # ------------------------------------------------------------------ the scheduled job

    def _schedule(self) -> None:
        if self.job is None:
            return
        self.next_job = self.job.next_run(datetime.now(timezone.utc))
        self.log(
            "job-scheduled", job=self.job.name, schedule=self.job.schedule, next=self.next_job.isoformat()
        )

    def _reload_job(self) -> None:
        """SIGHUP: the job file read and checked again; a file that no longer reads, or that names a kernel
        file the service was not started with, keeps the job as it was (one line says why)."""
        from autotune.jobs.nightly import load_job

        self._reload = False
        assert self.job is not None
        try:
            job = load_job(self.job.path)
            check_job(job, self.files.values())
        except SettingsError as e:
            self.log("reload-failed", f"{e}; the job stays as it was")
            return
        self.job = job
        self._schedule()

    def _job_if_due(self) -> bool:
        """Run the job when its time has come; True when it ran (or tried to)."""
        if self.next_job is None or datetime.now(timezone.utc) < self.next_job:
            return False
        assert self.job is not None
        job = replace(self.job.with_deadline_from(datetime.now(timezone.utc)), database=self.store.db.url)
        self.current, self.state = None, "tuning"  # the heartbeat: busy, no request
        self.log("job-started", job=job.name)
        try:
            self._in_search = True
            if self._stopping():
                raise ServiceStopping()
            result = self._run_job(job)
        except StoreError:
            raise  # the loop says it once and tries again at the next scheduled time
        except Exception as e:  # a job that fails is the job's problem, never the service's end
            self.log("job-failed", str(e), job=job.name)
        else:
            s = result.summary()
            self.log(
                "job-done",
                f"{len(s.get('shapes', []))} shape(s), {len(result.verifications)} verified, "
                f"{len(result.regressions)} regression(s)"
                + (f"; stopped: {result.stopped}" if result.stopped else ""),
                job=job.name,
                run_id=result.run_id,
                errors=len(result.errors),
                wall_s=round(result.wall_s, 2),
            )
        finally:
            self._in_search = False
            self.state = "idle"
            self._schedule()
        self._restart_broken()
        return True

    def _run_job(self, job: Job) -> Any:
        from autotune.jobs.nightly import run_job

        result = run_job(job, say=lambda line: self.log("job", line.strip(), job=job.name), tuners=self._lend)
        if job.report is not None:
            from autotune.jobs.report import write_report

            files = write_report(job.database, job.report, run_id=result.run_id)
            self.log("job-report", ", ".join(str(f) for f in files), job=job.name)
        return result

    @contextmanager
    def _lend(self, kjob: KernelJob, settings: SearchSettings, fresh: bool) -> Iterator[Any]:
        """The job's kernel on the service's warm workers: the job's budget, strategy, seed and timed calls,
        the service's devices and workers (``jobs.nightly.runner.TunerSource``)."""
        name = next((n for n, f in self.files.items() if f.resolve() == kjob.file.resolve()), None)
        if name is None or ((fresh or self.tuners[name].broken) and not self._restart(name)):
            raise SettingsError(
                f"{kjob.file}: not served now (changed on disk: reload the service with SIGHUP)"
            )
        tuner = self.tuners[name]
        job_settings = replace(
            tuner.settings,
            trials=settings.trials,
            strategy=settings.strategy,
            seed=settings.seed,
            num_tests=settings.num_tests,
        )
        with _settings(tuner, job_settings):
            yield tuner

    def _finish(
        self, work: Work, status: str, message: str, report: dict[str, Any] | None = None, **fields: Any
    ) -> None:
        ours = self.store.services.finish(work.id, self.owner, status, message, report)
        event = "tuned" if status == "done" else "refused"
        self.metrics.requests.labels(event).inc()
        if not ours:
            message += " (its lease had expired: another service took it over)"
        self.log(event, message, request=work.id, kernel=work.kernel_name, shape=work.shape_key, **fields)


def check_job(job: Job, kernel_files: Iterable[Path]) -> None:
    """A job the service can run: it has a schedule, and its kernel files are among the service's."""
    if job.schedule is None:
        raise SettingsError(
            f"{job.path}: schedule: missing: the service runs the job on it (e.g. '0 2 * * *')"
        )
    served = {f.resolve() for f in kernel_files}
    other = [str(k.file) for k in job.kernels if k.file.resolve() not in served]
    if other:
        raise SettingsError(
            f"{job.path}: kernels: {', '.join(other)}: not a kernel file of the service (it loads files only at start)"
        )


@contextmanager
def _settings(tuner: Any, settings: SearchSettings) -> Iterator[None]:
    """``tuner`` under ``settings`` for one search or job, its own ones after."""
    base, tuner.settings = tuner.settings, settings
    try:
        yield
    finally:
        tuner.settings = base


def _sqlite_file_id(store: Store) -> tuple[int, int] | None:
    """(device, inode) of the store's SQLite file; None on Postgres, or when the file is gone."""
    import os

    path = store.db.sqlite_path if store.db.is_sqlite else None
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return (0, 0)
    return st.st_dev, st.st_ino


def _hash_or_none(path: Path) -> str | None:
    """The file's source hash now; None when it cannot be read (deleted, mid-deploy)."""
    from autotune.kernel.contract import source_hash

    try:
        return source_hash(path)
    except OSError:
        return None


def _quietly(fn: Any, log: EventLog, event: str = "shutdown-step-failed") -> Any:
    """Shutdown steps each run even when one fails (the database may be the reason for stopping)."""
    try:
        return fn()
    except Exception as e:
        log(event, str(e))
        return None
