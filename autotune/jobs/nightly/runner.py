"""``autotune nightly JOB.yaml``: per kernel of the job, one ``Tuner`` (one set of workers, many shapes):
plan from the store, re-verify the stored bests, then tune / re-tune / resume the planned shapes within the
job's budget and deadline, record the run, write the report.

Two runs against one database never measure a config twice (the engine's claims), and a second run of the
same job resumes (a key's measured configs count against the job's evaluations)."""

from __future__ import annotations

import math
import socket
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from autotune.errors import AutotuneError, DatabaseUnreachableError
from autotune.jobs.nightly import regression
from autotune.jobs.nightly.job import Job, KernelJob
from autotune.jobs.nightly.planner import DONE, KernelPlan, ShapePlan, plan_kernel
from autotune.records import KeyState
from autotune.trial import config_hash

if TYPE_CHECKING:
    from autotune.store import Store
    from autotune.store.protocols import PlanSource, StoreReader

Say = Callable[[str], None]
#: ``tuners(kernel_job, settings, fresh)``: a context manager giving the started ``Tuner`` of one kernel of
#: the job under ``settings``; ``fresh``: the last one's workers are gone (a shape's inputs could not be
#: built). Default: new workers per kernel (``autotune nightly``); ``autotune serve --job`` lends its warm ones.
TunerSource = Callable[[KernelJob, Any, bool], AbstractContextManager[Any]]

#: when shapes remain to search, verification may take at most this share of the time left: a night with a
#: tight budget still resumes its searches (what it did not verify is verified the next night)
VERIFY_SHARE = 0.5
#: seconds of a job's budget kept for writing the report (at most this share of the budget): the budget
#: covers the whole command, report included
REPORT_RESERVE_S = 10.0
REPORT_RESERVE_SHARE = 0.1
#: exit code of a run that evaluated, reused and verified nothing (not a dry run): it achieved nothing
EXIT_IDLE = 3


@dataclass
class RunResult:
    run_id: str
    job_name: str
    dry_run: bool
    plans: list[dict[str, Any]] = field(default_factory=list)
    shapes: list[dict[str, Any]] = field(default_factory=list)
    verifications: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stopped: str | None = None
    wall_s: float = 0.0
    started_at: datetime | None = None
    report_files: list[str] = field(default_factory=list)
    #: verifications not made because another run held or had made them: {"shape", "reason"}
    verify_skipped: list[dict[str, Any]] = field(default_factory=list)

    @property
    def regressions(self) -> list[dict[str, Any]]:
        return [v for v in self.verifications if v["status"] in regression.REGRESSED]

    @property
    def confirmed(self) -> list[dict[str, Any]]:
        return [v for v in self.verifications if v["status"] == regression.CONFIRMED]

    @property
    def idle_reason(self) -> str | None:
        """Why the run achieved nothing (no config evaluated or reused, nothing verified), or None: a run
        that did something, or a dry run."""
        worked = any(s.get("evaluations") or s.get("reused") for s in self.shapes)
        if self.dry_run or worked or self.verifications:
            return None
        why = self.stopped or (
            "every verification was taken by another run"
            if self.verify_skipped
            else "every shape is tuned and nothing was verified"
        )
        return f"nothing evaluated or verified: {why}"

    def exit_code(self, fail_on_regression: bool) -> int:
        if self.errors:
            return 2
        if fail_on_regression and self.confirmed:
            return 1
        return EXIT_IDLE if self.idle_reason else 0

    def summary(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "job": self.job_name,
            "dry_run": self.dry_run,
            "wall_s": round(self.wall_s, 3),
            "plans": self.plans,
            "shapes": self.shapes,
            "verifications": self.verifications,
            "regressions": len(self.regressions),
            "confirmed": len(self.confirmed),
            "errors": self.errors,
            "stopped": self.stopped,
            "verify_skipped": self.verify_skipped,
            "idle": self.idle_reason,
        }


class _Nothing:
    """The history and requests roles of a database without our schema: nothing stored yet."""

    def key_states(self, kernel_name: str | None = None) -> list[KeyState]:
        return []

    def recorded(self, *a: Any, **kw: Any) -> list[Any]:
        return []


class _NoSchema:
    """A database without our schema, seen by a dry run (which writes nothing): what the planner reads."""

    history = requests = _Nothing()


def open_store(database: str | None, *, dry_run: bool) -> tuple[PlanSource, Store | None]:
    """(the store to plan from, the store to write to or None for a dry run). A database without a schema
    is created (as ``autotune search`` does); an outdated one says to run ``autotune db upgrade``; a dry run
    writes nothing, not even the schema: it plans from an empty history."""
    from autotune.store import Store

    store = Store.open(database, create=True, readonly=dry_run)  # a dry run writes nothing, creates nothing
    if dry_run and store.schema.missing():
        return _NoSchema(), None
    return store, (None if dry_run else store)


def _deadline(job: Job, started: float) -> float:
    """The run's end as a time.monotonic() value (inf: none): the budget less the report's reserve."""
    end = math.inf
    if job.budget_s > 0:
        reserve = (
            min(REPORT_RESERVE_S, REPORT_RESERVE_SHARE * job.budget_s) if job.report is not None else 0.0
        )
        end = started + job.budget_s - reserve
    if job.deadline is not None:
        left = (job.deadline - datetime.now(timezone.utc)).total_seconds()
        end = min(end, started + left)
    return end


def new_run_id(job: Job) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{job.name}-{stamp}-{socket.gethostname()}-{uuid.uuid4().hex[:6]}"


def describe_plan(plan: KernelPlan) -> list[str]:
    lines = [f"kernel {plan.kernel} ({plan.file}) on {plan.env_summary}; strategy {plan.strategy}"]
    for p in plan.shapes:
        extra = f", {len(p.warm_start)} warm-start config(s)" if p.warm_start else ""
        n = "" if p.action == DONE else f" {p.evaluations or 'auto (stopping rule)'} evaluations"
        lines.append(f"  {p.action:7s} {p.shape_key}:{n} ({p.reason}{extra})")
    for v in plan.verify:
        lines.append(f"  verify  {v.shape_key}: stored best {v.stored_s * 1e3:.4g} ms (key {v.key_id})")
    for s in plan.skipped_requests:
        lines.append(f"  skip    requested {s}")
    if not plan.shapes and not plan.verify:
        lines.append("  nothing to do")
    return lines


def run_job(
    job: Job,
    *,
    dry_run: bool = False,
    say: Say = lambda line: None,
    backend_factory: Callable[[str], Any] | None = None,
    worker_env: dict[str, str] | None = None,
    on_event: Callable[[Any], None] | None = None,
    tuners: TunerSource | None = None,
) -> RunResult:
    """Run (or, with ``dry_run``, only plan) ``job``; ``on_event``: the search loop's hook, called per
    finished trial (``tuning.progress`` prints it); ``tuners``: where each kernel's workers come from
    (default: started for the run, closed after). Errors of one kernel (a bad kernel file) are recorded
    and the next kernel runs; a database that goes away ends the run (rerun to resume)."""
    started = time.monotonic()
    started_at = datetime.now(timezone.utc)
    end = _deadline(job, started)
    plan_store, store = open_store(job.database, dry_run=dry_run)
    result = RunResult(new_run_id(job), job.name, dry_run)
    result.started_at = started_at
    if store is not None:
        # past its end (+ grace: a shape in flight finishes) a run still `running` was killed: the next closes it
        expires = (
            None if math.isinf(end) else datetime.now(timezone.utc) + timedelta(seconds=end - started + 3600)
        )
        store.verifications.start_run(result.run_id, job.name, socket.gethostname(), expires_at=expires)
    status = "failed"
    if tuners is None:
        tuners = _new_tuners(store, backend_factory, on_event)
    try:
        for kjob in job.kernels:
            settings = _kernel_settings(job, kjob, dry_run=dry_run, worker_env=worker_env)
            try:
                _run_kernel(job, kjob, settings, tuners, (plan_store, store), result, end, say)
            except DatabaseUnreachableError:
                raise
            except AutotuneError as e:
                result.errors.append(f"{kjob.file}: {e}")
                say(f"error: {kjob.file}: {e}")
        status = "done" if not result.errors else "errors"
    finally:
        result.wall_s = time.monotonic() - started
        if store is not None:
            try:
                store.verifications.finish_run(result.run_id, status, result.summary())
            except Exception:  # the run's own error (e.g. the database went away) is what to report
                pass
    return result


def _kernel_settings(job: Job, kjob: KernelJob, *, dry_run: bool, worker_env: dict[str, str] | None) -> Any:
    """The ``SearchSettings`` of one kernel of the job."""
    from autotune.settings import SearchSettings

    return SearchSettings.from_options(
        trials=job.evaluations_for(kjob),
        strategy=job.strategy_for(kjob),
        seed=job.seed,
        devices=job.devices,
        num_tests=job.num_tests,
        compile_workers=0 if dry_run else None,
        worker_env=dict(worker_env) if worker_env else None,
    )


def _new_tuners(
    store: Any, backend_factory: Callable[[str], Any] | None, on_event: Callable[[Any], None] | None
) -> TunerSource:
    """Workers started for each kernel of the run and closed after it."""

    @contextmanager
    def started(kjob: KernelJob, settings: Any, fresh: bool) -> Any:
        from autotune.tuning.tuner import Tuner

        backend = backend_factory(str(kjob.file)) if backend_factory else None
        with Tuner(str(kjob.file), store, settings, backend=backend, on_event=on_event) as tuner:
            tuner.start()
            yield tuner

    return started


def _run_kernel(
    job: Job,
    kjob: KernelJob,
    settings: Any,
    tuners: TunerSource,
    stores: tuple[Any, Any],
    result: RunResult,
    end: float,
    say: Say,
) -> None:
    """One kernel of the job: its workers, the plan, then (unless a dry run) verify and search."""
    from autotune.jobs.nightly.verify import Skipped, verify_one

    plan_store, store = stores
    with tuners(kjob, settings, False) as tuner:
        info = tuner.info
        assert tuner.space is not None and info is not None
        plan = plan_kernel(
            job,
            kjob,
            plan_store,
            meta=info.meta,
            env=info.env,
            space_hash=tuner.space.hash(),
            strategy=settings.strategy,
        )
        result.plans.append(plan.to_json())
        for line in describe_plan(plan):
            say(line)
        if result.dry_run:
            return
        searching = any(p.action != DONE for p in plan.shapes)
        left = end - time.monotonic()
        verify_end = time.monotonic() + VERIFY_SHARE * left if searching and math.isfinite(left) else end
        _verify(tuner, store, plan, job, result, info, verify_end, say, (verify_one, Skipped))
        rest = _search(tuner, plan, plan.shapes, result, end, say)
    while rest:  # a shape's inputs could not be built, which ends its workers: the rest on fresh ones
        with tuners(kjob, settings, True) as tuner:
            rest = _search(tuner, plan, rest, result, end, say)
    result.plans[-1] = plan.to_json()  # with the requests skipped while searching


def _verify(
    tuner: Any,
    store: StoreReader,
    plan: KernelPlan,
    job: Job,
    result: RunResult,
    info: Any,
    end: float,
    say: Say,
    verifier: tuple[Any, Any],
) -> None:
    if job.verify is None:
        return
    from autotune.store import Owner

    verify_one, skipped = verifier  # (verify.verify_one, verify.Skipped), imported by the caller
    owner = Owner()  # the claims of this run's verifications (verify:<config hash> per key)
    for item in plan.verify:
        if time.monotonic() >= end:
            result.stopped = result.stopped or "budget or deadline reached during verification"
            say(f"  verify  {item.shape_key}: skipped (budget or deadline reached)")
            continue
        v = verify_one(
            tuner,
            store,
            item,
            job.verify,
            run_id=result.run_id,
            default_config=dict(info.meta.default_config),
            device_name=plan.device_name,
            kernel_name=plan.kernel,
            deadline=end,
            owner=owner,
            since=result.started_at,
        )
        if isinstance(v, skipped):
            result.verify_skipped.append({"shape": item.shape_key, "key_id": item.key_id, "reason": v.reason})
            say(f"  verify  {item.shape_key}: skipped ({v.reason})")
            continue
        if v is None:
            result.stopped = result.stopped or "budget or deadline reached during verification"
            say(f"  verify  {item.shape_key}: skipped (budget or deadline reached)")
            continue
        d = v.to_json()
        result.verifications.append(d)
        ratio = f"{v.ratio:.3f}x" if v.ratio is not None else "-"
        p = f"p={v.p_value:.2g}" if v.p_value is not None else ""
        say(
            f"  verify  {item.shape_key}: {v.status} ({ratio} of baseline {p}{'; ' + v.error if v.error else ''})"
        )


def _search(
    tuner: Any, plan: KernelPlan, shapes: list[ShapePlan], result: RunResult, end: float, say: Say
) -> list[ShapePlan]:
    """Search ``shapes`` in order; returns those left when one's inputs could not be built (the tuner's
    workers are gone then: the caller starts new ones), else []."""
    from autotune.engine import ShapeInputError

    for i, p in enumerate(shapes):
        entry: dict[str, Any] = {
            "kernel": plan.kernel,
            "shape": p.shape_key,
            "action": p.action,
            "reason": p.reason,
            "planned": p.evaluations,
            "warm_start": len(p.warm_start),
            "evaluations": 0,
        }
        result.shapes.append(entry)
        if p.action == DONE:
            entry["best_s"] = p.stored_best_s
            continue
        left = end - time.monotonic()
        if left <= 0:
            entry["skipped"] = "budget or deadline reached"
            result.stopped = result.stopped or "budget or deadline reached"
            say(f"  {p.action:7s} {p.shape_key}: skipped (budget or deadline reached)")
            continue
        tuner.settings.trials = p.evaluations
        tuner.settings.timeout_s = 0.0 if math.isinf(left) else left
        try:
            r = tuner.search_shape(p.shape, warm_start=p.warm_start)
        except DatabaseUnreachableError as e:
            raise DatabaseUnreachableError(
                f"{e}; every finished trial is stored: rerun the same job to resume"
            ) from None
        except ShapeInputError as e:
            _unbuildable(plan, p, entry, str(e), result, say)
            return list(shapes[i + 1 :])
        warm = {config_hash(c) for c in p.warm_start}
        entry.update(
            evaluations=r.evaluations,
            stop_reason=r.stop_reason,
            reused=r.reused,
            busy=r.busy,
            best_s=r.best.time_s if r.best else None,
            best_config=r.best.config if r.best else None,
            default_s=r.default.time_s if r.default else None,
            speedup=r.speedup,
            statuses=dict(r.statuses),
            wall_s=round(r.wall_s, 3),
            best_from_warm_start=bool(r.best and config_hash(r.best.config) in warm),
        )
        best = f"best {r.best.time_s * 1e3:.4g} ms" if r.best and r.best.time_s else "no ok config"
        sp = f", {r.speedup:.2f}x over default" if r.speedup else ""
        say(
            f"  {p.action:7s} {p.shape_key}: {r.evaluations} evaluated ({r.stop_reason}), {r.reused} reused; "
            f"{best}{sp}"
        )
    return []


def _unbuildable(
    plan: KernelPlan, p: ShapePlan, entry: dict[str, Any], error: str, result: RunResult, say: Say
) -> None:
    """A shape whose inputs the kernel file could not build (N=10**12 cannot be allocated). Requested only
    at run time, it is production's data: skipped with the reason, as the planner skips a malformed one.
    Named by the job file or the kernel's defaults, it is an error of the run (exit 2); the rest runs."""
    why = " ".join(error.split(" failed: ", 1)[-1].split())  # the worker's cause, without the path
    why = why if len(why) <= 300 else why[:297] + "..."
    entry["skipped"] = f"inputs cannot be built: {why}"
    if set(p.sources) == {"requested"}:
        plan.skipped_requests.append(f"{p.shape_key} (inputs cannot be built: {why})")
        say(f"  skip    requested {p.shape_key}: inputs cannot be built: {why}")
    else:
        result.errors.append(f"{plan.file}: {p.shape_key}: {why}")
        say(f"error: {plan.file}: {p.shape_key}: {why}")
