"""The tables, as SQLAlchemy 2.0 typed models. The schema itself is created by the Alembic migrations
(``alembic/versions``), which must match these models exactly (tests/test_migrations.py checks it).

Every table is prefixed ``autotune_``: Optuna keeps its own tables in the same database."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    DateTime,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    column,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from autotune.trial import KIND_SEARCH, TrialStatus

TABLE_PREFIX = "autotune_"
VERSION_TABLE = "autotune_alembic_version"

# Deterministic constraint names, so that later migrations can drop/alter them on every backend.
# Kept short: Postgres truncates identifiers at 63 characters.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s",
    "pk": "pk_%(table_name)s",
}

#: the statuses the CHECK constraint allows (the initial migration spells out the same list)
STATUS_VALUES = tuple(s.value for s in TrialStatus)
#: verdicts of a verification (``autotune.jobs.nightly.regression``); ``inconclusive``: no verdict possible
#: (fewer than 3 usable samples, or samples in different clock bands)
VERIFICATION_STATUSES = ("ok", "regression", "confirmed", "improved", "failed", "inconclusive")
#: a claim is ``running`` while its owner evaluates the config, ``done`` once the trial is stored
CLAIM_STATUSES = ("running", "done")
#: a shape request's place in the ``autotune serve`` queue: waiting, taken by a service (with a lease),
#: tuned (or found tuned), or refused (not a kernel any live service runs, a bad shape)
REQUEST_STATUSES = ("queued", "running", "done", "refused")
#: a service's state in its heartbeat row
SERVICE_STATES = ("starting", "idle", "tuning", "stopped")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    """Alembic autogenerate filter: only our tables (Optuna's live in the same database)."""
    if type_ == "table":
        return bool(name) and name.startswith(TABLE_PREFIX) and name != VERSION_TABLE
    return True


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class KernelRow(Base):
    __tablename__ = "autotune_kernels"
    __table_args__ = (UniqueConstraint("name", "source_hash"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String)
    source_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class EnvironmentRow(Base):
    """Where a result is valid (``autotune.env.ENV_KEY_FIELDS``); the hostname is per trial."""

    __tablename__ = "autotune_environments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    env_hash: Mapped[str] = mapped_column(String(64), unique=True)
    device_kind: Mapped[str] = mapped_column(String)
    gpu_name: Mapped[str] = mapped_column(String)
    cc: Mapped[str] = mapped_column(String)
    sm_count: Mapped[int] = mapped_column(Integer)
    driver: Mapped[str] = mapped_column(String)
    cuda: Mapped[str] = mapped_column(String)
    torch: Mapped[str] = mapped_column(String)
    triton: Mapped[str] = mapped_column(String)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ShapeRow(Base):
    __tablename__ = "autotune_shapes"
    __table_args__ = (UniqueConstraint("kernel_name", "shape_key", "dtypes_key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kernel_name: Mapped[str] = mapped_column(String)
    shape_key: Mapped[str] = mapped_column(String)
    dims: Mapped[dict[str, int]] = mapped_column(JSON)
    dtypes: Mapped[dict[str, str]] = mapped_column(JSON)
    #: canonical JSON text of ``dtypes`` (JSON columns cannot be compared/unique on every backend)
    dtypes_key: Mapped[str] = mapped_column(String)


class TuningKeyRow(Base):
    """The key a best config is valid for: kernel source x search space x shape x environment."""

    __tablename__ = "autotune_tuning_keys"
    __table_args__ = (UniqueConstraint("kernel_id", "space_hash", "shape_id", "environment_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kernel_id: Mapped[int] = mapped_column(ForeignKey("autotune_kernels.id"))
    space_hash: Mapped[str] = mapped_column(String(64))
    space: Mapped[dict[str, Any]] = mapped_column(JSON)
    shape_id: Mapped[int] = mapped_column(ForeignKey("autotune_shapes.id"))
    environment_id: Mapped[int] = mapped_column(ForeignKey("autotune_environments.id"))
    study_name: Mapped[str] = mapped_column(String, unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class TrialRow(Base):
    __tablename__ = "autotune_trials"
    __table_args__ = (
        CheckConstraint(column("status").in_(STATUS_VALUES), name="status"),
        Index("ix_autotune_trials_key_id_config_hash", "key_id", "config_hash"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key_id: Mapped[int] = mapped_column(ForeignKey("autotune_tuning_keys.id"))
    optuna_trial_number: Mapped[int | None] = mapped_column(Integer)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    config_hash: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(32))
    time_s: Mapped[float | None] = mapped_column(Double)
    mean_s: Mapped[float | None] = mapped_column(Double)
    min_s: Mapped[float | None] = mapped_column(Double)
    spread: Mapped[float | None] = mapped_column(Double)
    launches: Mapped[float | None] = mapped_column(Double)
    tflops: Mapped[float | None] = mapped_column(Double)
    gbps: Mapped[float | None] = mapped_column(Double)
    compile_s: Mapped[float | None] = mapped_column(Double)
    error: Mapped[str | None] = mapped_column(Text)
    #: per-kernel timing breakdown (TrialResult.kernels), kept so a reused result is complete
    kernels: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    worker: Mapped[str | None] = mapped_column(String)
    hostname: Mapped[str | None] = mapped_column(String)
    #: the device it was measured on (cuda:1, cpu): provenance within a key shared by identical GPUs
    device: Mapped[str | None] = mapped_column(String)
    measured: Mapped[bool] = mapped_column(Boolean)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    #: the correctness check's metrics (TrialResult.check)
    check: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    #: KIND_SEARCH | KIND_RETIME (TrialResult.kind)
    kind: Mapped[str] = mapped_column(String(16), default=KIND_SEARCH, server_default=KIND_SEARCH)
    #: the GPU's SM clock during the measurement (TrialResult.clock_*; None without a clock source)
    clock_min_mhz: Mapped[float | None] = mapped_column(Double)
    clock_max_mhz: Mapped[float | None] = mapped_column(Double)
    clock_limit_mhz: Mapped[float | None] = mapped_column(Double)
    throttle_reasons: Mapped[str | None] = mapped_column(String)
    throttled: Mapped[bool | None] = mapped_column(Boolean)
    retakes: Mapped[int | None] = mapped_column(Integer)
    #: the timed calls behind time_s (TrialResult.calls; fewer than --num-tests where raced)
    calls: Mapped[int | None] = mapped_column(Integer)
    #: a re-timing's interleaved round (TrialResult.retime_round): the samples a speedup pairs
    retime_round: Mapped[str | None] = mapped_column(String(64))


class BestConfigRow(Base):
    """The best ok+measured trial of a key, denormalized so the runtime lookup is one indexed query."""

    __tablename__ = "autotune_best_configs"
    __table_args__ = (
        Index("ix_autotune_best_configs_kernel_name_device_name", "kernel_name", "device_name"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key_id: Mapped[int] = mapped_column(ForeignKey("autotune_tuning_keys.id"), unique=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("autotune_trials.id"))
    kernel_name: Mapped[str] = mapped_column(String)
    source_hash: Mapped[str] = mapped_column(String(64))
    space_hash: Mapped[str] = mapped_column(String(64))
    shape_key: Mapped[str] = mapped_column(String)
    dims: Mapped[dict[str, int]] = mapped_column(JSON)
    dtypes_key: Mapped[str] = mapped_column(String)
    device_name: Mapped[str] = mapped_column(String)
    cc: Mapped[str] = mapped_column(String)
    env_hash: Mapped[str] = mapped_column(String(64))
    torch: Mapped[str] = mapped_column(String)
    triton: Mapped[str] = mapped_column(String)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    time_s: Mapped[float] = mapped_column(Double)
    tflops: Mapped[float | None] = mapped_column(Double)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    #: measurements behind time_s (its median): 1, or more for a re-timed finalist
    samples: Mapped[int | None] = mapped_column(Integer)
    #: (max - min) / median of those measurements (None for one)
    spread: Mapped[float | None] = mapped_column(Double)
    #: a 95 % bootstrap interval of the median (``autotune.stats.median_interval``)
    ci_low_s: Mapped[float | None] = mapped_column(Double)
    ci_high_s: Mapped[float | None] = mapped_column(Double)
    #: default / best over paired interleaved rounds, its 95 % interval, the pairs (``stats.paired_ratio``)
    speedup: Mapped[float | None] = mapped_column(Double)
    speedup_low: Mapped[float | None] = mapped_column(Double)
    speedup_high: Mapped[float | None] = mapped_column(Double)
    pairs: Mapped[int | None] = mapped_column(Integer)


class ClaimRow(Base):
    """Who evaluates a config of a key: the unique (key, config) pair lets exactly one process measure it.

    A ``running`` claim carries a lease its owner renews while it lives; an expired lease (the owner died)
    makes the claim reclaimable. ``done`` points at the stored trial, which every other process reuses."""

    __tablename__ = "autotune_claims"
    __table_args__ = (
        UniqueConstraint("key_id", "config_hash"),
        CheckConstraint(column("status").in_(CLAIM_STATUSES), name="status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key_id: Mapped[int] = mapped_column(ForeignKey("autotune_tuning_keys.id"))
    config_hash: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16))
    #: host:pid:token:pid-namespace of the claiming process (the token tells apart a reused pid, the
    #: namespace containers that share a hostname)
    owner: Mapped[str] = mapped_column(String)
    host: Mapped[str] = mapped_column(String)
    pid: Mapped[int] = mapped_column(Integer)
    device: Mapped[str | None] = mapped_column(String)
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    lease_expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    trial_id: Mapped[int | None] = mapped_column(ForeignKey("autotune_trials.id"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ShapeRequestRow(Base):
    """A shape production asked ``best_config`` for and got a fallback (nearest shape or default), counted
    in-process and flushed by ``autotune.requests_log`` (issue 10): what the next nightly job tunes.
    ``dtypes_key`` is "" when the caller did not say (the kernel's declared dtypes)."""

    __tablename__ = "autotune_shape_requests"
    __table_args__ = (
        UniqueConstraint(
            "kernel_name", "shape_key", "dtypes_key", "device_name", "source_hash", "space_hash"
        ),
        CheckConstraint(column("status").in_(REQUEST_STATUSES), name="status"),
        Index("ix_autotune_shape_requests_status_device_name", "status", "device_name"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kernel_name: Mapped[str] = mapped_column(String)
    shape_key: Mapped[str] = mapped_column(String)
    dims: Mapped[dict[str, int]] = mapped_column(JSON)
    dtypes_key: Mapped[str] = mapped_column(String)
    device_name: Mapped[str] = mapped_column(String)
    #: the version of the kernel asked for: its file's sha256 and its space's hash ("": any version, as a
    #: miss recorded without a hash). A service takes only what its loaded file matches (issue 45)
    source_hash: Mapped[str] = mapped_column(String, default="", server_default="")
    space_hash: Mapped[str] = mapped_column(String, default="", server_default="")
    count: Mapped[int] = mapped_column(Integer)
    first_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    #: the ``autotune serve`` queue (``store.services``): REQUEST_STATUSES; the taking service's owner id
    #: and lease while running; when it was tuned; why it was refused (one line)
    status: Mapped[str] = mapped_column(String(16), default="queued", server_default="queued")
    owner: Mapped[str | None] = mapped_column(String)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    tuned_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    message: Mapped[str | None] = mapped_column(Text)
    #: an ``autotune search`` handed to a service: its budget (trials, timeout_s, strategy, seed), and the
    #: search's report (``tuning.shape_search.report_dict``) once done, which that command prints
    options: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    report: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class ServiceRow(Base):
    """One ``autotune serve`` process: its heartbeat (``last_beat``), what it serves, what it works on."""

    __tablename__ = "autotune_services"
    __table_args__ = (CheckConstraint(column("state").in_(SERVICE_STATES), name="state"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    #: host:pid:token:pid-namespace (``store.claims.Owner.id``)
    owner: Mapped[str] = mapped_column(String, unique=True)
    host: Mapped[str] = mapped_column(String)
    pid: Mapped[int] = mapped_column(Integer)
    #: the stored device name it tunes for (a GPU model, or the CPU's name) and its devices (cuda:0,...)
    device_name: Mapped[str | None] = mapped_column(String)
    devices: Mapped[str] = mapped_column(String)
    #: the kernels it was started with: [{"name", "source_hash", "shape_params"}] (``autotune request``
    #: finds a file's kernel here by its hash, without importing it)
    kernels: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    started: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_beat: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    request_id: Mapped[int | None] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))


class VerificationRow(Base):
    """One re-measurement of a key's best config by a nightly run: never updated (history), one row per
    (run, key). ``samples_s`` are the per-repeat times; ``status`` the verdict of the rank test."""

    __tablename__ = "autotune_verifications"
    __table_args__ = (
        CheckConstraint(column("status").in_(VERIFICATION_STATUSES), name="status"),
        Index("ix_autotune_verifications_key_id_config_hash", "key_id", "config_hash"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key_id: Mapped[int] = mapped_column(ForeignKey("autotune_tuning_keys.id"))
    trial_id: Mapped[int | None] = mapped_column(ForeignKey("autotune_trials.id"))
    run_id: Mapped[str] = mapped_column(String)
    kernel_name: Mapped[str] = mapped_column(String)
    shape_key: Mapped[str] = mapped_column(String)
    device_name: Mapped[str] = mapped_column(String)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    config_hash: Mapped[str] = mapped_column(String(32))
    #: what the sample is compared with: the stored trial's time, or the baseline verification's median
    baseline_s: Mapped[float | None] = mapped_column(Double)
    median_s: Mapped[float | None] = mapped_column(Double)
    samples_s: Mapped[list[float]] = mapped_column(JSON)
    #: the kernel's default config timed interleaved with the best (the in-run reference)
    reference_s: Mapped[list[float] | None] = mapped_column(JSON)
    ratio: Mapped[float | None] = mapped_column(Double)
    p_value: Mapped[float | None] = mapped_column(Double)
    threshold: Mapped[float] = mapped_column(Double)
    status: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    hostname: Mapped[str | None] = mapped_column(String)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    #: best/reference per interleaved round (rounds with a throttled measurement left out)
    ratios: Mapped[list[float] | None] = mapped_column(JSON)
    #: best/default at tuning time (the stored trials): what the run's ratios are judged against
    tuned_ratio: Mapped[float | None] = mapped_column(Double)
    #: the SM clock range over the kept samples (MHz; None without a clock source)
    clock_min_mhz: Mapped[float | None] = mapped_column(Double)
    clock_max_mhz: Mapped[float | None] = mapped_column(Double)
    #: measurements left out because their clock stayed throttled
    throttled: Mapped[int | None] = mapped_column(Integer)


class NightlyRunRow(Base):
    """One ``autotune nightly`` run: the job's name, when, and its summary (what was tuned, re-tuned,
    verified); the report reads these."""

    __tablename__ = "autotune_nightly_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[str] = mapped_column(String, unique=True)
    job_name: Mapped[str] = mapped_column(String)
    hostname: Mapped[str] = mapped_column(String)
    status: Mapped[str] = mapped_column(String(16))
    summary: Mapped[dict[str, Any]] = mapped_column(JSON)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
