"""Nightly tuning jobs (``autotune nightly JOB.yaml``): a validated job file (``job``), a plan from the store
(``planner``: tune, re-tune after an environment change, resume, verify), re-verification with a rank test
(``verify``, ``regression``), the run itself (``runner``). The report lives in ``autotune.jobs.report``."""

from __future__ import annotations

from autotune.jobs.nightly.job import Job, KernelJob, VerifySpec, load_job
from autotune.jobs.nightly.runner import RunResult, run_job

__all__ = ["Job", "KernelJob", "RunResult", "VerifySpec", "load_job", "run_job"]
