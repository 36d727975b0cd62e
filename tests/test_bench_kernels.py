"""data/kernels/matmul_fp16.py, the held-out kernel of issue 19's live check (docs/benchmarks.md): it
passes the kernel-file check under TRITON_INTERPRET=1, and configs other than the default compute the right
product at a shape no tile divides (the masks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_softmax_example import autotune

pytestmark = pytest.mark.triton

ROOT = Path(__file__).resolve().parents[1]
MATMUL = str(ROOT / "data" / "kernels" / "matmul_fp16.py")
SHAPE = ["--shape", "M=48,N=40,K=72"]


def test_matmul_fp16_passes_the_kernel_file_check() -> None:
    proc = autotune("check", MATMUL, "--device", "cpu", *SHAPE, "--no-time")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1368 valid configs" in proc.stdout  # the H200's shared memory bound leaves this many


def test_matmul_fp16_configs_compute_the_product(tmp_path: Path) -> None:
    out = tmp_path / "search.json"
    proc = autotune(
        "search", MATMUL, "--device", "cpu", *SHAPE, "--strategy", "random", "--trials", "3",
        "--num-tests", "1", "--db", f"sqlite:///{tmp_path / 'm.db'}", "--json", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text())[0]
    # a wrong product would be wrong_result; the random sampler may also draw a config the space's constraints
    # reject (``invalid``: never compiled nor counted), which says nothing about the product
    statuses = dict(report["statuses"])
    statuses.pop("invalid", None)
    assert statuses == {"ok": 3}, report
