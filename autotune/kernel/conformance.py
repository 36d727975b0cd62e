"""Conformance check of a kernel file against the contract: ``autotune check FILE`` or, in a test suite,
``assert_conforms(path)``. ``check_kernel_file`` runs in the calling process (for test suites);
``autotune check`` runs it in a spawn-ed process (``check_kernel_file_isolated``), as search and bench do."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autotune.errors import AutotuneError
from autotune.shapes import Shape, check_shape


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


def _tensors(obj: Any) -> list[Any]:
    import torch

    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in _tensors(v)]
    if isinstance(obj, list | tuple):
        return [t for v in obj for t in _tensors(v)]
    if hasattr(obj, "__dict__"):
        return _tensors(vars(obj))
    return []


def check_kernel_file(
    path: str | os.PathLike[str], device: str = "", shape: Shape | None = None, time_it: bool = True
) -> list[Check]:
    """Run every check; never raises for a failed check (each is a ``Check`` with ``ok=False``)."""
    run = _CheckRun(path, shape)
    if not run.step("load", run.load):
        return run.checks
    run.pick_device(device)
    run.step("space", run.space)
    # Each of these needs what the one before built: the first failure ends the run.
    gates = [("shapes", run.shapes), ("inputs", run.inputs), ("default config", run.run_default)]
    if all(run.step(name, fn) for name, fn in gates):
        run.step("flops", run.flops)
        if time_it:
            run.step("timing", run.timing)
    return run.checks


class _CheckRun:
    """One run of the checks: what each step builds for the next ones, and the ``Check`` list. Each
    check is a method returning its detail line, or raising to fail."""

    def __init__(self, path: str | os.PathLike[str], shape: Shape | None):
        self.path, self.requested_shape = path, shape
        self.checks: list[Check] = []
        self.k: Any = None  # the LoadedKernel
        self.dev = ""
        self.facts: dict[str, Any] = {}
        self.shape: Shape = {}
        self.inputs_: Any = None
        self.launcher: Any = None

    def step(self, name: str, fn: Callable[[], str]) -> bool:
        try:
            self.checks.append(Check(name, True, fn()))
            return True
        except AutotuneError as exc:
            self.checks.append(Check(name, False, str(exc)))
        except Exception as exc:
            self.checks.append(Check(name, False, f"{type(exc).__name__}: {exc}"))
        return False

    def load(self) -> str:
        from autotune.kernel.contract import load_kernel_file

        self.k = k = load_kernel_file(self.path)
        return f"KERNEL {k.name!r}, times {', '.join(k.kernel.kernel_names)}, space from {k.space_source}"

    def pick_device(self, device: str) -> None:
        import torch

        from autotune.env import device_facts

        self.dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.facts = device_facts(self.dev)

    def space(self) -> str:
        from autotune.space import Space

        k, dev, facts = self.k, self.dev, self.facts
        sp = Space.from_dict(k.space_def, source=k.space_source)
        problems = sp.check(dict(k.kernel.default_config), facts)
        if problems:
            raise AutotuneError(
                f"default_config {dict(k.kernel.default_config)} is invalid on {dev}: {'; '.join(problems)}"
            )
        if not sp.enumerable(facts):  # a large space (a Helion kernel's) is sampled, never listed
            from autotune.space import format_count

            size, exact = sp.size_info(facts)
            about = "" if exact else "at most "
            return f"{about}{format_count(size)} configs before constraints on {dev} (too many to count); default config is valid; hash {sp.hash()[:12]}"
        return f"{sp.count(facts)} valid configs on {dev}; default config is valid; hash {sp.hash()[:12]}"

    def shapes(self) -> str:
        k, shape = self.k, self.requested_shape
        got = k.default_shapes()
        if not got:
            raise AutotuneError("default_shapes is empty")
        target = check_shape(shape, k.shape_params) if shape else min(got, key=_size)
        self.shape = target
        return f"{len(got)} default shapes; checking on {target}"

    def inputs(self) -> str:
        import torch

        k, s, dev = self.k, self.shape, self.dev
        first = k.kernel.make_inputs(dict(s), dev)
        second = k.kernel.make_inputs(dict(s), dev)
        ts, ts2 = _tensors(first), _tensors(second)
        if not ts:
            raise AutotuneError("make_inputs returned no tensors")
        floats = [(a, b) for a, b in zip(ts, ts2, strict=False) if a.is_floating_point() and a.numel() > 1]
        if any(bool((a.float() == 0).all()) for a, _ in floats):
            raise AutotuneError("make_inputs returned an all-zero tensor: zeros hide wrong results")
        if floats and all(torch.equal(a.float(), b.float()) for a, b in floats):
            raise AutotuneError("make_inputs returned the same data twice: inputs must be fresh random data")
        self.inputs_ = first
        return f"{len(ts)} tensors, random and fresh"

    def run_default(self) -> str:
        k = self.k
        cfg = dict(k.kernel.default_config)
        launcher = k.kernel.compile(cfg, self.inputs_)
        out = launcher()
        ref = k.kernel.reference(self.inputs_)
        mismatch = k.compare(out, ref)
        if mismatch:
            raise AutotuneError(f"default config does not match the reference: {mismatch}")
        self.launcher = launcher
        return "default config compiles, runs and matches the reference"

    def flops(self) -> str:
        """The optional hooks: defined (a positive number), not defined (no figure shown), or raising
        (a ``KernelHookError``: this check fails with its message)."""
        k, s = self.k, self.shape
        f, b = k.flops(dict(s)), k.bytes_moved(dict(s))
        flops = f"flops {f:.4g}" if f is not None else "no flops(): TFLOP/s not shown"
        moved = f"bytes {b:.4g}" if b is not None else "no bytes_moved(): GB/s not shown"
        return f"{flops}, {moved}"

    def timing(self) -> str:
        from autotune.bench import bench_kineto_detailed

        k = self.k
        res = bench_kineto_detailed(
            self.launcher,
            k.timed_kernels(dict(k.kernel.default_config)),
            num_tests=5,
            suppress_kineto_output=True,
            device="cuda" if self.dev.startswith("cuda") else "cpu",
        )
        matched = "; ".join(f"{n} -> {', '.join(st.matched)}" for n, st in res.kernels.items())
        from autotune.trial import fmt_time

        return f"{fmt_time(res.per_call_s)} per call; {matched}"


def assert_conforms(
    path: str | os.PathLike[str], device: str = "", shape: Shape | None = None, time_it: bool = True
) -> None:
    """For a kernel author's test suite: fail with every failed check listed."""
    failed = [c for c in check_kernel_file(path, device, shape, time_it) if not c.ok]
    assert not failed, "; ".join(f"{c.name}: {c.detail}" for c in failed)


def check_kernel_file_isolated(
    path: str | os.PathLike[str],
    device: str = "",
    shape: Shape | None = None,
    time_it: bool = True,
    *,
    timeout_s: float,
) -> list[Check]:
    """``check_kernel_file`` in a spawn-ed process (``kernel.isolated``), as ``search`` and ``bench`` load
    kernel files: a file that exits, crashes or hangs at import (or anywhere in the check) gives one
    clear error instead of taking the command down with it or hanging it."""
    from autotune.kernel.isolated import run_isolated

    return run_isolated(
        check_kernel_file,
        str(path),
        device,
        shape,
        time_it,
        path=path,
        doing="checking the kernel file",
        timeout_s=timeout_s,
        timeout_hint="AUTOTUNE_START_TIMEOUT + AUTOTUNE_RUN_TIMEOUT",
    )


def _size(shape: Shape) -> int:
    """A shape's size (the product of its dimensions): the conformance check runs on the smallest."""
    return math.prod(int(v) for v in shape.values())
