"""What a nightly run does for one kernel, and why, decided from the store before anything is measured:

- ``tune``: a shape nobody tuned (explicit, a default shape, or requested at run time);
- ``retune``: a shape tuned under another environment (torch, Triton, driver, CUDA, kernel source or
  space changed, or another GPU of the same family): searched again from the old best configs first;
- ``resume``: a shape whose key has fewer measured configs than the job's evaluations (an earlier run
  stopped on its budget, or is still running elsewhere): the rest of the budget; with ``evaluations:
  auto``, any key with measured configs: the stopping rule counts them and stops at once if they suffice;
- ``done``: the key already measured the job's evaluations (with ``auto``: the rule's ceiling);
- ``verify``: every current best config of the kernel on this environment is re-measured;
- skipped: a request that is no shape of the kernel (other dimensions, a dimension out of range), listed
  with the reason (the runner adds those whose inputs cannot be built, e.g. N=10**12 on the CPU).

Keys are matched on the current environment's hash, the kernel's source hash, the space hash and the
dtypes: exactly the tuning key the search would use."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from autotune.env import env_hash as compute_env_hash
from autotune.errors import ShapeError
from autotune.jobs.nightly.job import Job, KernelJob
from autotune.records import KeyState
from autotune.settings import SearchSettings
from autotune.shapes import check_shape, format_shape

if TYPE_CHECKING:
    from autotune.store.protocols import PlanSource

TUNE, RETUNE, RESUME, DONE = "tune", "retune", "resume", "done"


@dataclass
class ShapePlan:
    shape: dict[str, int]
    shape_key: str
    action: str
    reason: str
    evaluations: int | None  # new evaluations this run may spend on it; None: the stopping rule decides
    warm_start: list[dict[str, Any]] = field(default_factory=list)
    sources: tuple[str, ...] = ()  # where the shape came from: default, requested, explicit
    stored_best_s: float | None = None  # the current key's best time, when it has one


@dataclass
class VerifyPlan:
    key_id: int
    shape: dict[str, int]
    shape_key: str
    config: dict[str, Any]
    trial_id: int
    stored_s: float


@dataclass
class KernelPlan:
    file: str
    kernel: str
    device_name: str
    env_summary: str
    strategy: str
    shapes: list[ShapePlan]
    verify: list[VerifyPlan]
    skipped_requests: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "kernel": self.kernel,
            "device": self.device_name,
            "environment": self.env_summary,
            "strategy": self.strategy,
            "shapes": [
                {
                    "shape": p.shape_key,
                    "action": p.action,
                    "reason": p.reason,
                    "evaluations": p.evaluations,
                    "warm_start": len(p.warm_start),
                    "sources": list(p.sources),
                }
                for p in self.shapes
            ],
            "verify": [
                {"shape": v.shape_key, "key_id": v.key_id, "stored_s": v.stored_s} for v in self.verify
            ],
            "skipped_requests": self.skipped_requests,
        }


def _same_family(a: KeyState, env: dict[str, Any]) -> bool:
    """Another GPU of the same model family: the same compute capability (sm_90 for H100 and H200), or
    the same device name; a CPU only matches a CPU."""
    return a.device_name == env.get("gpu_name") or (a.cc == str(env.get("cc")) and a.cc not in ("", "sim"))


def _what_changed(old: KeyState, env: dict[str, Any], source_hash: str, space_hash: str) -> str:
    changes = [
        f"{f} {getattr(old, f)} -> {env.get(f)}"
        for f in ("torch", "triton", "driver", "cuda")
        if str(getattr(old, f)) != str(env.get(f, ""))
    ]
    if old.device_name != env.get("gpu_name"):
        changes.append(f"GPU {old.device_name} -> {env.get('gpu_name')}")
    if old.source_hash != source_hash:
        changes.append("kernel source changed")
    if old.space_hash != space_hash:
        changes.append("search space changed")
    return ", ".join(changes) or "another environment"


def plan_kernel(
    job: Job,
    kjob: KernelJob,
    store: PlanSource,
    *,
    meta: Any,
    env: dict[str, Any],
    space_hash: str,
    strategy: str,
) -> KernelPlan:
    """The plan of one kernel of the job. ``meta``: the kernel's ``KernelMeta`` (from a started worker);
    ``env``: the environment the workers report."""
    keys = _StoredKeys(job, kjob, store, meta=meta, env=env, space_hash=space_hash)
    shapes = _job_shapes(job, kjob, store, meta, keys.device_name)
    plans = [keys.plan_shape(key, *seen) for key, seen in shapes.by_key.items()]
    verify = keys.verify_plans() if job.verify is not None else []
    return KernelPlan(
        str(kjob.file),
        meta.name,
        keys.device_name,
        _env_summary(env),
        strategy,
        plans,
        verify,
        shapes.skipped,
    )


class _Shapes:
    """The shapes of one kernel job, each once, in the job's order, remembering where each came from
    (and, for a requested one, how often it was requested)."""

    def __init__(self, params: tuple[str, ...]):
        self.params = params
        self.by_key: dict[str, tuple[dict[str, int], list[str], int]] = {}
        self.skipped: list[str] = []  # requests not planned, and why

    def add(self, dims: dict[str, int], source: str, count: int = 0) -> None:
        shape = check_shape(dims, self.params)
        key = format_shape(shape)
        if key in self.by_key:
            if source not in self.by_key[key][1]:
                self.by_key[key][1].append(source)
            return
        self.by_key[key] = (shape, [source], count)


def _job_shapes(job: Job, kjob: KernelJob, store: PlanSource, meta: Any, device_name: str) -> _Shapes:
    shapes = _Shapes(tuple(meta.shape_params))
    for entry in kjob.shapes:
        if entry == "default":
            for s in meta.default_shapes:
                shapes.add(dict(s), "default")
        elif entry == "requested":
            _add_requested(shapes, job, store.requests.recorded(meta.name, device_name=device_name))
        else:
            shapes.add(dict(entry), "explicit")
    return shapes


def _add_requested(shapes: _Shapes, job: Job, requests: Any) -> None:
    """The shapes requested at run time often enough, up to ``requested.max_shapes``. A request is data
    from production (any process that called ``best_config(..., record=True)``): one that is not a shape
    of this kernel is skipped with the reason, never an error of the job."""
    params, taken = shapes.params, 0
    for r in requests:
        if r.count < job.requested.min_count:
            continue
        key = _clip(str(r.shape_key))
        why = request_problem(r.dims, params)
        if why is not None:
            shapes.skipped.append(f"{key} ({why})")
            continue
        shape = check_shape({p: r.dims[p] for p in params}, params)
        if taken >= job.requested.max_shapes:
            shapes.skipped.append(f"{key} (more than requested.max_shapes)")
            continue
        shapes.add(shape, "requested", r.count)
        taken += 1


def request_problem(dims: Any, params: tuple[str, ...] | list[str]) -> str | None:
    """Why a recorded request is no shape of a kernel with shape parameters ``params`` (None: it is one):
    the nightly planner skips it with this reason, ``autotune show --requests`` shows it."""
    if not isinstance(dims, dict) or set(dims) != set(params):
        return f"not the kernel's shape parameters {','.join(params)}"
    try:
        check_shape({p: dims[p] for p in params}, tuple(params))
    except ShapeError as e:  # e.g. N=2**70: "bad shape M=..,N=..: N=... is too large (max 2**62)"
        return str(e).split(": ", 1)[-1]
    return None


def clip_key(text: str, limit: int = 120) -> str:
    """A shape key for a message: one line, bounded (a recorded key is anyone's text)."""
    return _clip(text, limit)


def _clip(text: str, limit: int = 120) -> str:
    """A shape key for a message: one line, bounded (a recorded key is anyone's text)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else f"{text[: limit - 23]}...{text[-20:]}"


class _StoredKeys:
    """The kernel's tuning keys in the store, split into the current environment's (matched on the
    environment's hash, the source hash, the space hash and the dtypes) and the others."""

    def __init__(
        self, job: Job, kjob: KernelJob, store: PlanSource, *, meta: Any, env: dict[str, Any], space_hash: str
    ):
        from autotune.store import dtypes_key

        self.job, self.meta, self.env, self.space_hash = job, meta, env, space_hash
        self.params = tuple(meta.shape_params)
        self.device_name = str(env.get("gpu_name", ""))
        self.budget = job.evaluations_for(kjob)
        #: measured configs that make a key done (with the stopping rule: its ceiling)
        self.ceiling = self.budget if self.budget is not None else SearchSettings().stop_max
        ehash, dkey = compute_env_hash(env), dtypes_key(meta.dtypes)
        self.states = store.history.key_states(meta.name)
        self.current = {
            s.shape_key: s
            for s in self.states
            if s.env_hash == ehash
            and s.source_hash == meta.source_hash
            and s.space_hash == space_hash
            and s.dtypes_key == dkey
        }
        self.current_ids = {s.key_id for s in self.current.values()}

    def plan_shape(self, key: str, shape: dict[str, int], sources: list[str], count: int) -> ShapePlan:
        """done, resume (the current key has measured configs), else retune or tune."""
        cur, budget, src = self.current.get(key), self.budget, tuple(sources)
        measured = cur.measured if cur else 0
        if measured >= self.ceiling:
            best_s = cur.best_time_s if cur else None
            return ShapePlan(
                shape, key, DONE, f"{measured} configs measured under this key", 0, [], src, best_s
            )
        if measured > 0:
            if budget is None:
                reason = f"{measured} configs measured under this key; the stopping rule decides on more"
                return ShapePlan(shape, key, RESUME, reason, None, [], src)
            reason = f"{measured} of {budget} evaluations measured under this key"
            return ShapePlan(shape, key, RESUME, reason, budget - measured, [], src)
        why = (
            f"requested {count} time(s) at run time"
            if "requested" in sources
            else ", ".join(sources) + " shape"
        )
        olds = self._tuned_elsewhere(key)
        if olds and self.job.retune:
            olds.sort(key=lambda s: (s.created_at, s.key_id), reverse=True)  # newest first
            warm: list[dict[str, Any]] = []
            for s in olds:
                if s.best_config not in warm:
                    warm.append(s.best_config)
            changed = _what_changed(olds[0], self.env, self.meta.source_hash, self.space_hash)
            return ShapePlan(shape, key, RETUNE, f"tuned under {changed}; {why}", budget, warm, src)
        return ShapePlan(shape, key, TUNE, f"not tuned yet: {why}", budget, [], src)

    def _tuned_elsewhere(self, key: str) -> list[dict[str, Any]]:
        """The shape's keys with a best config under another environment of the same GPU family."""
        return [
            s
            for s in self.states
            if s.shape_key == key
            and s.key_id not in self.current_ids
            and s.best_config is not None
            and _same_family(s, self.env)
        ]

    def verify_plans(self) -> list[VerifyPlan]:
        """Every current key with a stored best, to re-measure."""
        params, verify = self.params, []
        for s in self.current.values():
            if s.best_config is not None and s.best_trial_id is not None and s.best_time_s:
                verify.append(
                    VerifyPlan(
                        s.key_id,
                        check_shape(s.dims, params) if set(s.dims) == set(params) else dict(s.dims),
                        s.shape_key,
                        dict(s.best_config),
                        int(s.best_trial_id),
                        float(s.best_time_s),
                    )
                )
        return verify


def _env_summary(env: dict[str, Any]) -> str:
    return (
        f"{env.get('gpu_name', '')} (cc {env.get('cc')}), torch {env.get('torch')}, triton {env.get('triton')}, "
        f"driver {env.get('driver')}, CUDA {env.get('cuda')}"
    )
