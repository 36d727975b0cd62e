"""The Helion parts that need no helion: the public name, light imports, the value encoding, the fault type.
(The kernel and the drop-in on real Helion kernels: tests/test_helion.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from autotune.engine.faults import classify
from autotune.kernel.helion import NONE, InvalidConfig, decode, encode
from autotune.trial import TrialStatus

ROOT = Path(__file__).resolve().parents[1]


def test_helion_kernel_is_public() -> None:
    import autotune
    from autotune.kernel import helion

    assert autotune.HelionKernel is helion.HelionKernel and "HelionKernel" in autotune.__all__


def test_importing_the_helion_modules_imports_no_helion_torch_or_triton() -> None:
    code = (
        "import sys, autotune, autotune.kernel.helion, autotune.runtime.helion; "
        "autotune.HelionKernel; "
        "print([m for m in ('helion', 'torch', 'triton', 'optuna', 'typer', 'alembic') if m in sys.modules])"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("value", "like"),
    [(None, None), ([1, 0], [0, 1]), ([], []), (64, 32), ("block_ptr", "pointer"), (True, None)],
)
def test_helion_values_round_trip_through_space_choices(value: object, like: object) -> None:
    choice = encode(value)
    assert isinstance(choice, int | float | str | bool)  # a Space choice: never null, never a list
    assert decode(choice, like) == value


def test_none_is_a_string_choice() -> None:
    assert encode(None) == NONE and decode(NONE, 128) is None


def test_a_helion_invalid_config_is_typed_invalid_not_a_compile_failure() -> None:
    assert (
        classify(InvalidConfig("Helion's normalization changes x=1"), "compile").status is TrialStatus.INVALID
    )
    assert classify(RuntimeError("ptxas error"), "compile").status is TrialStatus.COMPILE_FAILED
