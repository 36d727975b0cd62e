"""What went wrong in a candidate's compile or run, typed by what happened rather than where.

Kernel files often compile by launching once, so a run-time fault of the first launch surfaces in
``compile()``; calling everything raised there ``compile_failed`` hid crashes and out-of-memory errors from
the user. ``classify`` reads the exception (its type by name, so no torch import, and its text):

- CUDA out of memory (``torch.OutOfMemoryError``, or "out of memory" in the text) -> ``launch_failed``,
  reason "out of memory": the config asked for more than the device has; the context stays usable;
- a sticky CUDA error (illegal or misaligned address, illegal instruction, device-side assert, unspecified
  launch failure) -> ``crashed``: the process's CUDA context is poisoned, so the worker that saw it must be
  replaced before it compiles or times anything else (it would blame the next configs);
- any other CUDA error -> ``launch_failed``, and the worker is replaced too (its context may be unusable);
- an exception named ``InvalidConfig`` from ``compile()`` (``autotune.kernel.helion``'s, Helion's) ->
  ``invalid``: the kernel's own validity rule rejected the config before compiling it;
- anything else: a compiler error in ``compile()`` (``compile_failed``), a failed launch in ``run()``.

The reason leads the stored error text (``"out of memory: ..."``), so stored trials keep their type without a
new column; ``label`` turns a result into what the tables show ("launch_failed (out of memory)")."""

from __future__ import annotations

from dataclasses import dataclass

from autotune.trial import TrialResult, TrialStatus

OUT_OF_MEMORY = "out of memory"
#: a worker process that died (killed from outside, a segfault): unlike a typed fault, maybe transient
WORKER_DIED = "worker died"

#: (text in the error, the reason recorded): CUDA errors that poison the process's context
_STICKY: tuple[tuple[str, str], ...] = (
    ("illegal memory access", "illegal address"),
    ("illegal address", "illegal address"),
    ("misaligned address", "misaligned address"),
    ("illegal instruction", "illegal instruction"),
    ("device-side assert", "device-side assert"),
    ("unspecified launch failure", "unspecified launch failure"),
)
#: every reason a typed fault may record (what ``reason_of`` recognises at the head of an error)
REASONS = (OUT_OF_MEMORY, WORKER_DIED, "cuda error", *dict.fromkeys(r for _, r in _STICKY))


@dataclass(frozen=True)
class Fault:
    status: TrialStatus
    #: what happened, in a few words (None: nothing more to say than the status)
    reason: str | None
    #: the process's CUDA context may be unusable: the worker must be replaced before its next job
    replace_worker: bool = False

    def error(self, detail: str) -> str:
        """The stored error text: the reason first, so ``reason_of`` reads it back."""
        return f"{self.reason}: {detail}" if self.reason else detail


def _type_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def classify(exc: BaseException, phase: str) -> Fault:
    """The fault of an exception raised by a kernel file's ``compile()`` (``phase="compile"``) or by the
    check or timing of its launcher (``phase="run"``)."""
    text = str(exc).lower()
    if "OutOfMemoryError" in _type_names(exc) or OUT_OF_MEMORY in text:
        return Fault(TrialStatus.LAUNCH_FAILED, OUT_OF_MEMORY)
    for needle, reason in _STICKY:
        if needle in text:
            return Fault(TrialStatus.CRASHED, reason, replace_worker=True)
    if "AcceleratorError" in _type_names(exc) or "cuda error" in text or "cudaerror" in text:
        return Fault(TrialStatus.LAUNCH_FAILED, "cuda error", replace_worker=True)
    if phase == "compile" and "InvalidConfig" in _type_names(exc):
        # a kernel's own validity rule, met only at compile time (Helion's normalization): never compiled
        return Fault(TrialStatus.INVALID, None)
    if phase == "compile":
        return Fault(TrialStatus.COMPILE_FAILED, None)
    return Fault(TrialStatus.LAUNCH_FAILED, None)


def reason_of(error: str | None) -> str | None:
    """The reason a typed fault recorded at the head of ``error`` (None: none)."""
    if not error:
        return None
    head = error.split(":", 1)[0].strip()
    return head if head in REASONS else None


def label(result: TrialResult) -> str:
    """What the tables show for a result: its status, with the fault's reason when there is one."""
    reason = reason_of(result.error)
    if reason and reason != WORKER_DIED and result.status in (TrialStatus.LAUNCH_FAILED, TrialStatus.CRASHED):
        return f"{result.status.value} ({reason})"
    return result.status.value


def is_worker_death(result: TrialResult) -> bool:
    """A worker that died without saying why: retried once on a fresh worker (maybe transient), unlike a
    sticky CUDA fault the kernel raised (it would raise again)."""
    return result.status is TrialStatus.CRASHED and reason_of(result.error) in (None, WORKER_DIED)
