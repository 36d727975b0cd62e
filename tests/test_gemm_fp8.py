"""examples/gemm_fp8.py and search_spaces/gemm_fp8.yaml, on the CPU.

Correctness runs in Triton's interpreter, in one subprocess (TRITON_INTERPRET must be set before the
kernel's @triton.jit functions are created, and other tests may have imported them already). The
shared-memory constraint is checked against real sm_90 compiles, cross-compiled here without a GPU, in
another subprocess (the interpreter's functions cannot be compiled)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNEL_FILE = ROOT / "examples" / "gemm_fp8.py"
SPACE_FILE = ROOT / "search_spaces" / "gemm_fp8.yaml"

SMALL = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 2, "num_stages": 2, "num_warps": 4}
RAGGED = {"M": 33, "N": 70, "K": 200}  # nothing divides: masks on M, N and K
RAGGED16 = {"M": 33, "N": 70, "K": 208}  # K % 16 == 0 for TMA, still ragged against BLOCK_K
EVEN = {"M": 64, "N": 128, "K": 256}
# id: (shape, config overrides; {} is the kernel's default config)
CASES: dict[str, tuple[dict[str, int], dict[str, Any]]] = {
    "ragged-ptr-sk1": (RAGGED, {**SMALL, "USE_TMA": False, "SPLIT_K": 1}),
    "ragged-ptr-sk3": (RAGGED, {**SMALL, "USE_TMA": False, "SPLIT_K": 3}),  # uneven K ranges
    "ragged-ptr-sk8": (RAGGED, {**SMALL, "USE_TMA": False, "SPLIT_K": 8}),  # 7 K tiles: one split is empty
    "ragged-tma-sk1": (RAGGED16, {**SMALL, "USE_TMA": True, "SPLIT_K": 1}),
    "ragged-tma-sk2": (RAGGED16, {**SMALL, "USE_TMA": True, "SPLIT_K": 2}),
    "even-tma-sk4": (EVEN, {**SMALL, "BLOCK_M": 64, "BLOCK_K": 64, "USE_TMA": True, "SPLIT_K": 4}),
    "even-ptr-group": (EVEN, {**SMALL, "BLOCK_M": 16, "GROUP_M": 3, "USE_TMA": False, "SPLIT_K": 1}),
    "default-ragged": (RAGGED, {}),
    # SPLIT_REDUCE=fused: the tile's last program sums the partials (no second launch)
    "ragged-ptr-sk3-fused": (RAGGED, {**SMALL, "USE_TMA": False, "SPLIT_K": 3, "SPLIT_REDUCE": "fused"}),
    "ragged-ptr-sk8-fused": (RAGGED, {**SMALL, "USE_TMA": False, "SPLIT_K": 8, "SPLIT_REDUCE": "fused"}),
    "ragged-tma-sk2-fused": (RAGGED16, {**SMALL, "USE_TMA": True, "SPLIT_K": 2, "SPLIT_REDUCE": "fused"}),
    "even-tma-sk4-fused": (
        EVEN,
        {**SMALL, "BLOCK_M": 64, "BLOCK_K": 64, "USE_TMA": True, "SPLIT_K": 4, "SPLIT_REDUCE": "fused"},
    ),
    # SPLIT_REDUCE=atomic: partials added into one fp32 tile, finished by the tile's last program
    "ragged-ptr-sk3-atomic": (RAGGED, {**SMALL, "USE_TMA": False, "SPLIT_K": 3, "SPLIT_REDUCE": "atomic"}),
    "ragged-ptr-sk8-atomic": (RAGGED, {**SMALL, "USE_TMA": False, "SPLIT_K": 8, "SPLIT_REDUCE": "atomic"}),
    "ragged-tma-sk2-atomic": (RAGGED16, {**SMALL, "USE_TMA": True, "SPLIT_K": 2, "SPLIT_REDUCE": "atomic"}),
    # IMPL=persistent: 3 programs in the interpreter, each looping over several tiles
    "ragged-persistent-flat": (
        RAGGED16,
        {"IMPL": "persistent", **SMALL, "FLATTEN": True, "TMA_STORE": False},
    ),
    # the TMA store clips the ragged M and N edges (N % 8 == 0: 16-byte rows)
    "ragged-persistent-tma-store": (
        {"M": 33, "N": 72, "K": 208},
        {"IMPL": "persistent", **SMALL, "FLATTEN": True, "TMA_STORE": True},
    ),
    "even-persistent-g1": (
        EVEN,
        {"IMPL": "persistent", **SMALL, "BLOCK_N": 16, "GROUP_M": 1, "FLATTEN": False, "TMA_STORE": True},
    ),
    "rows-persistent-g3": (
        {"M": 16 * 7 + 3, "N": 40, "K": 64},
        {"IMPL": "persistent", **SMALL, "BLOCK_M": 16, "BLOCK_N": 16, "GROUP_M": 3, "FLATTEN": True}
        | {"TMA_STORE": False},
    ),
    # IMPL=scaled_mm: torch's own fp8 GEMM (cuBLASLt on a GPU)
    "even-scaled-mm": (EVEN, {"IMPL": "scaled_mm"}),
}
# A config is the kernel's default updated with the case's values, except for the non-Triton
# implementations, whose configs hold only their own parameters (as the space makes them).
# The space's larger values (BLOCK_*=256, GROUP_M 1 and 32, 2 and 6 stages; slow in the interpreter). The
# interpreter ignores num_stages and num_warps, so those run here for the launch path only; the GPU side of
# every value is bench/smem_probe.py's sm_90 compiles.
BIG = {"M": 260, "N": 300, "K": 528}  # ragged against every tile; K % 16 == 0 for TMA, 3 K tiles of 256
BIG8 = {"M": 260, "N": 296, "K": 528}  # N % 8 == 0 for the TMA store, still ragged against every tile
ROWS = {"M": 16 * 37 + 5, "N": 40, "K": 64}  # 38 tile-rows of 16: a full group of 32 and a ragged one
BIG_CASES: dict[str, tuple[dict[str, int], dict[str, Any]]] = {
    "m256-ptr-g1-s2": (
        BIG,
        {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 256, "GROUP_M": 1, "num_stages": 2, "num_warps": 8},
    ),
    "m256-tma-g32-s5": (
        BIG,
        {"BLOCK_M": 256, "BLOCK_N": 64, "BLOCK_K": 128, "GROUP_M": 32, "num_stages": 5, "USE_TMA": True},
    ),
    "n256-tma-g32-s6": (
        BIG,
        {"BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 32, "num_stages": 6, "USE_TMA": True},
    ),
    "k256-ptr-sk2-s3": (
        BIG,
        {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 256, "num_stages": 3, "num_warps": 4, "SPLIT_K": 2},
    ),
    # 3 K tiles over 8 splits: five splits are empty and must write zeros
    "k256-tma-sk8-s4": (
        BIG,
        {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 256, "num_stages": 4, "USE_TMA": True, "SPLIT_K": 8},
    ),
    "persistent-m256-g32-flat": (
        BIG8,
        {"IMPL": "persistent", "BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 32}
        | {"num_stages": 3, "num_warps": 8, "FLATTEN": True, "TMA_STORE": True},
    ),
    "persistent-k256-g1": (
        BIG,
        {"IMPL": "persistent", "BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 256, "GROUP_M": 1}
        | {"num_stages": 2, "num_warps": 8, "FLATTEN": False, "TMA_STORE": False},
    ),
    # 3 K tiles over 8 splits, fused: five splits are empty, and the tile's last program may be one of them
    "k256-ptr-sk8-fused": (
        BIG,
        {"BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 256, "num_stages": 2, "num_warps": 4, "SPLIT_K": 8}
        | {"SPLIT_REDUCE": "fused"},
    ),
    "rows-group1": (ROWS, {**SMALL, "BLOCK_M": 16, "BLOCK_N": 16, "GROUP_M": 1}),
    "rows-group32": (ROWS, {**SMALL, "BLOCK_M": 16, "BLOCK_N": 16, "GROUP_M": 32, "num_stages": 6}),
}
PROBE_FILE = ROOT / "data" / "probes" / "smem_probe_sm90.json"
# Broken variants that KERNEL.compare must reject.
NEGATIVE = ("dropped-k-tile", "dropped-split", "dropped-scale", "one-bad-element", "fused-stale-counter")


def _config(default: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    return dict(over) if over.get("IMPL", "triton") != "triton" else {**default, **over}


def _subprocess(
    mode: str, interpret: bool, timeout: float = 300, extra_env: dict[str, str] | None = None
) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    env |= extra_env or {}
    proc = subprocess.run(
        [sys.executable, __file__, mode], capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout
    )
    if proc.returncode != 0:
        raise AssertionError(f"{mode} subprocess failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def interp() -> dict[str, Any]:
    return _subprocess("--interp", interpret=True)


@pytest.mark.triton
@pytest.mark.parametrize("case", list(CASES))
def test_matches_reference_in_interpreter(interp: dict[str, Any], case: str) -> None:
    assert interp["cases"][case] is None, interp["cases"][case]


@pytest.fixture(scope="module")
def interp_big() -> dict[str, Any]:
    return _subprocess("--interp-big", interpret=True)


@pytest.mark.triton
@pytest.mark.slow
@pytest.mark.parametrize("case", list(BIG_CASES))
def test_large_values_match_reference_in_interpreter(interp_big: dict[str, Any], case: str) -> None:
    assert interp_big[case] is None, interp_big[case]


@pytest.mark.triton
@pytest.mark.parametrize("variant", NEGATIVE)
def test_compare_catches_broken_variant(interp: dict[str, Any], variant: str) -> None:
    assert interp["negative"][variant], f"{variant} passed the correctness check"


@pytest.mark.triton
def test_conforms_in_interpreter(interp: dict[str, Any]) -> None:
    assert interp["conformance"] is None, interp["conformance"]


@pytest.mark.triton
def test_tma_rejects_unaligned_k(interp: dict[str, Any]) -> None:
    assert "K % 16" in interp["tma_unaligned"]


@pytest.mark.triton
def test_fused_split_k_repeats_exactly(interp: dict[str, Any]) -> None:
    """The fused reduction resets its counters and sums in split order: call after call the same bits,
    equal to the two-kernel reduction's."""
    assert interp["fused_repeat"] == {
        "counters_zero": True,
        "identical": True,
        "check": None,
        "equals_kernel_reduce": True,
    }


@pytest.mark.triton
def test_atomic_split_k_leaves_its_workspace_zero(interp: dict[str, Any]) -> None:
    assert interp["atomic_repeat"] == {"checks": [None, None, None], "ws_zero": True}


@pytest.mark.triton
def test_config_without_impl_runs_the_original_kernel(interp: dict[str, Any]) -> None:
    assert interp["no_impl"] == {
        "same_bits": True,
        "timed": ["_autotune_gemm_fp8_kernel", "_autotune_gemm_fp8_splitk_reduce"],
    }


@pytest.mark.triton
def test_gemm_fp8_runs_the_configs_implementation(interp: dict[str, Any]) -> None:
    ran = interp["gemm_fp8_ran"]
    assert ran["triton"]["kernels"] == ["_autotune_gemm_fp8_kernel"]
    assert ran["fused"]["kernels"] == ["_autotune_gemm_fp8_splitk_fused"]
    assert ran["atomic"]["kernels"] == ["_autotune_gemm_fp8_splitk_fused"]
    assert ran["persistent"]["kernels"] == ["_autotune_gemm_fp8_persistent"]
    assert ran["scaled_mm"]["kernels"] == ["nvjet_cpu_scaled_mm"]
    assert all(r["check"] is None for r in ran.values()), ran
    assert interp["fallback"] is None  # scaled_mm's config on a ragged shape: the default config ran


@pytest.mark.triton
def test_features_for_every_implementation() -> None:
    """The auto strategy's features: the same keys for every config of the space, finite values."""
    import math

    from autotune.env import DEVICE_PRESETS
    from autotune.kernel.contract import load_kernel_file
    from autotune.space import Space

    kern = load_kernel_file(KERNEL_FILE).kernel
    h200 = DEVICE_PRESETS["h200"]
    keys = set()
    for c in Space.from_yaml(SPACE_FILE).enumerate(h200):
        f = kern.features(c, {"M": 64, "N": 2112, "K": 7168}, h200)
        keys.add(tuple(sorted(f)))
        assert all(math.isfinite(v) for v in f.values()), (c, f)
    assert len(keys) == 1 and "waves" in next(iter(keys))


@pytest.mark.triton
def test_impl_limits() -> None:
    from autotune.kernel.contract import load_kernel_file

    mod = sys.modules[type(load_kernel_file(KERNEL_FILE).kernel).__module__]
    assert "divisible by 16" in mod.check_config({"IMPL": "scaled_mm"}, 64, 70, 256)
    assert mod.check_config({"IMPL": "scaled_mm"}, 64, 80, 256) is None
    pers = {"IMPL": "persistent", **SMALL, "FLATTEN": True, "TMA_STORE": False}
    assert "K % 16" in mod.check_config(pers, 64, 70, 200)
    assert mod.check_config(pers, 33, 70, 208) is None
    assert "N % 8" in mod.check_config({**pers, "TMA_STORE": True}, 33, 70, 208)
    assert mod.check_config({**pers, "TMA_STORE": True}, 33, 72, 208) is None
    assert "unknown IMPL" in mod.check_config({"IMPL": "cutlass"}, 64, 64, 64)
    fused = {**SMALL, "USE_TMA": False, "SPLIT_K": 4, "SPLIT_REDUCE": "fused"}
    # [4, 33, 70] partials, then one counter per 32x32 tile (2 x 3)
    assert mod.workspace_numel(fused, 33, 70) == 4 * 33 * 70 + 6
    assert mod.workspace_numel({**fused, "SPLIT_REDUCE": "kernel"}, 33, 70) == 4 * 33 * 70
    assert mod.workspace_numel({**fused, "SPLIT_REDUCE": "atomic"}, 33, 70) == 33 * 70 + 6
    assert mod.workspace_numel({**fused, "SPLIT_K": 1}, 33, 70) == 0
    assert mod.workspace_numel(pers, 33, 70) == 0


@pytest.mark.slow
@pytest.mark.triton
def test_best_config_selects_the_library(tmp_path: Path) -> None:
    """End to end: a search whose best config is the library's; gemm_fp8() then runs it from the database."""
    configs = tmp_path / "configs.json"
    configs.write_text(json.dumps([{"IMPL": "scaled_mm"}]))
    db = tmp_path / "t.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOTUNE_")}
    env |= {"TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT), "AUTOTUNE_DB": str(db)}
    search = [sys.executable, "-m", "autotune", "search", str(KERNEL_FILE), "--device", "cpu"]
    search += ["--shape", "M=32,N=48,K=64", "--configs", str(configs), "--compile-workers", "1"]
    proc = subprocess.run(search, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    res = _subprocess("--best-config", interpret=True, extra_env={"AUTOTUNE_DB": str(db)})
    assert res["config"] == {"IMPL": "scaled_mm"}
    assert res["kernels"] == ["nvjet_cpu_scaled_mm"] and res["check"] is None


@pytest.mark.triton
def test_declaration() -> None:
    from autotune.kernel.contract import load_kernel_file

    k = load_kernel_file(KERNEL_FILE)
    assert k.name == "gemm_fp8" and Path(k.space_source) == SPACE_FILE
    kern = k.kernel
    assert kern.kernel_names == ("_autotune_gemm_fp8_kernel",)
    assert k.timed_kernels({**kern.default_config, "SPLIT_K": 1}) == ("_autotune_gemm_fp8_kernel",)
    assert k.timed_kernels({**kern.default_config, "SPLIT_K": 4}) == (
        "_autotune_gemm_fp8_kernel",
        "_autotune_gemm_fp8_splitk_reduce",
    )
    fused = {**kern.default_config, "SPLIT_K": 4, "SPLIT_REDUCE": "fused"}
    assert k.timed_kernels(fused) == ("_autotune_gemm_fp8_splitk_fused",)
    assert k.timed_kernels({**fused, "SPLIT_REDUCE": "atomic"}) == ("_autotune_gemm_fp8_splitk_fused",)
    assert k.timed_kernels({**fused, "SPLIT_REDUCE": "kernel"}) == k.timed_kernels(
        {**fused, "SPLIT_K": 4} | {"SPLIT_REDUCE": "kernel"}
    )
    assert k.timed_kernels({"IMPL": "persistent", **SMALL, "FLATTEN": True, "TMA_STORE": False}) == (
        "_autotune_gemm_fp8_persistent",
    )
    assert k.timed_kernels({"IMPL": "scaled_mm"}) == ("nvjet",)  # cuBLASLt's nvjet_sm90_* kernels
    shapes = k.default_shapes()
    assert len(shapes) == 18 and len({tuple(s.values()) for s in shapes}) == 18
    assert {"M": 64, "N": 2112, "K": 7168} in shapes and {"M": 4096, "N": 7168, "K": 16384} in shapes
    assert kern.flops({"M": 2, "N": 3, "K": 5}) == 60
    assert kern.bytes_moved({"M": 2, "N": 3, "K": 5}) == 10 + 15 + 12


@pytest.mark.triton
def test_space_on_h200() -> None:
    space_mod = pytest.importorskip("autotune.space")
    from autotune.env import DEVICE_PRESETS
    from autotune.kernel.contract import load_kernel_file

    h200 = DEVICE_PRESETS["h200"]
    space = space_mod.Space.from_yaml(SPACE_FILE)
    default = dict(load_kernel_file(KERNEL_FILE).kernel.default_config)
    assert space.check(default, h200) == []
    assert space.normalize(default) == default  # every active parameter given, nothing inactive
    # 5 * (128 + 256) * 128 = 245,760 B of pipeline buffers > 232,448 B
    too_big = {**default, "BLOCK_N": 256, "num_stages": 5, "num_warps": 8}
    assert any("smem_fits" in p for p in space.check(too_big, h200))
    assert space.check({**too_big, "num_stages": 4}, h200) == []
    assert any("tma_needs_hopper" in p for p in space.check({**default, "USE_TMA": True}, {**h200, "cc": 80}))
    # 256 accumulator floats per thread spill (data/probes/smem_probe_sm90.json); 128 do not
    wide = {**default, "BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64}
    assert space.check(wide, h200) == []
    assert any("acc_fits_registers" in p for p in space.check({**wide, "num_warps": 4}, h200))
    assert any("acc_fits_registers" in p for p in space.check({**wide, "BLOCK_N": 256}, h200))
    small = {**default, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 256, "GROUP_M": 1, "num_stages": 6}
    assert space.check(small, h200) == []
    split = {**small, "GROUP_M": 8, "SPLIT_K": 8, "USE_TMA": True, "SPLIT_REDUCE": "kernel"}
    # an earlier space's split-K config (no SPLIT_REDUCE) still runs (the kernel file reads it as
    # "kernel"), but is no longer a config of this space
    assert space.check({k: v for k, v in split.items() if k != "SPLIT_REDUCE"}, h200) == [
        "missing param SPLIT_REDUCE"
    ]
    assert space.check(split, h200) == []
    assert any("split_k_for_small_m" in p for p in space.check({**split, "BLOCK_M": 128}, h200))
    assert any("split_k_for_small_m" in p for p in space.check({**split, "GROUP_M": 32}, h200))
    # IMPL and its conditionals: the library takes no parameters; SPLIT_REDUCE only with split-K;
    # FLATTEN only for the persistent kernel, which has no USE_TMA or SPLIT_K
    assert space.check({"IMPL": "scaled_mm"}, h200) == []
    assert any("inactive" in p for p in space.check({"IMPL": "scaled_mm", "BLOCK_M": 64}, h200))
    assert any("inactive" in p for p in space.check({**split, "SPLIT_K": 1, "SPLIT_REDUCE": "fused"}, h200))
    assert space.check({**split, "SPLIT_REDUCE": "fused"}, h200) == []
    pers = {k: v for k, v in default.items() if k not in ("USE_TMA", "SPLIT_K")}
    pers |= {"IMPL": "persistent", "BLOCK_N": 256, "num_stages": 4, "FLATTEN": True, "TMA_STORE": False}
    assert space.check(pers, h200) == []  # 229,408 B
    assert any("smem_fits_persistent" in p for p in space.check({**pers, "num_stages": 5}, h200))
    # the TMA store stages the 64 KiB output tile: 262,176 B
    assert any("smem_fits_persistent" in p for p in space.check({**pers, "TMA_STORE": True}, h200))
    assert space.check({**pers, "TMA_STORE": True, "num_stages": 3}, h200) == []
    assert any("persistent_needs_hopper" in p for p in space.check(pers, {**h200, "cc": 89}))
    # the fused reduction spills at 64x256 on 4 warps with pointer loads, not with TMA
    spill = {**split, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 4, "num_stages": 2, "SPLIT_REDUCE": "fused"}
    assert space.check(spill, h200) == []
    assert any("fused_fits_registers" in p for p in space.check({**spill, "USE_TMA": False}, h200))
    by_impl: dict[str, int] = {}
    for c in space.enumerate(h200):
        by_impl[c["IMPL"]] = by_impl.get(c["IMPL"], 0) + 1
    # the one-program-per-tile Triton kernel keeps the earlier space's 1,440 configs, plus its split-K
    # ones reduced in one launch (fused: less the 27 that spill; atomic raced on the H200: not offered)
    assert by_impl == {"triton": 1440 + 429, "persistent": 1920, "scaled_mm": 1}


def _probe_key(c: dict[str, Any]) -> tuple[Any, ...]:
    names = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps")
    return (*(c[n] for n in names), bool(c["USE_TMA"]), c["SPLIT_K"] > 1)


def test_space_matches_sm90_probe() -> None:
    """The resource constraints against bench/smem_probe.py's record of real sm_90 compiles: a probed
    combination is admitted exactly when it compiled, fits shared memory and does not spill, and every
    config the space admits on an H200 is covered by a probed combination that did."""
    space_mod = pytest.importorskip("autotune.space")
    from autotune.env import DEVICE_PRESETS

    probe = json.loads(PROBE_FILE.read_text())
    h200 = DEVICE_PRESETS["h200"]
    limit = h200["smem_per_block"]
    assert probe["limit_smem_per_block"] == limit
    space = space_mod.Space.from_yaml(SPACE_FILE)
    resources = ("smem_fits", "acc_fits_registers")
    good: set[tuple[Any, ...]] = set()
    rows = [
        r for r in probe["rows"] if r["kind"] in ("main", "register_rejected") and r["K"] % r["BLOCK_K"] == 0
    ]
    assert len(rows) >= 700
    for r in rows:
        cfg = {"IMPL": "triton", **{n: r[n] for n in space.names if n in r}}
        if cfg["SPLIT_K"] > 1:
            cfg["SPLIT_REDUCE"] = "kernel"  # what the probe compiled (the fused kernel: the variants test)
        admitted = not any(name in v for v in space.check(cfg, h200) for name in resources)
        fits = r["ok"] and r["shared"] <= limit and not r.get("spill_stores") and not r.get("spill_loads")
        assert admitted == fits, r
        if fits:
            good.add(_probe_key(r))
    # masked (ragged-K) pointer loads at the most stages that fit: same bytes, no spills either
    for r in (r for r in probe["rows"] if r["kind"] == "ragged_k"):
        assert r["ok"] and r["shared"] <= limit and not r.get("spill_stores"), r
    main = [c for c in space.enumerate(h200) if c["IMPL"] == "triton" and c.get("SPLIT_REDUCE") != "fused"]
    missing = [c for c in main if _probe_key(c) not in good]
    assert not missing, f"{len(missing)} admitted configs without a fitting sm_90 compile, e.g. {missing[0]}"


VARIANT_PROBE_FILE = ROOT / "data" / "probes" / "smem_probe_sm90_variants.json"
VARIANT_RESOURCES = ("smem_fits", "smem_fits_persistent", "acc_fits_registers", "fused_fits_registers")


def _variant_config(r: dict[str, Any]) -> dict[str, Any]:
    """The space's config of a row of the variants probe (GROUP_M and the split-K value change nothing
    in the compiled resources)."""
    c = {n: r[n] for n in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_stages", "num_warps")}
    if r["variant"] == "persistent":
        return {"IMPL": "persistent", **c, "FLATTEN": r["FLATTEN"], "TMA_STORE": r.get("TMA_STORE", False)}
    return {"IMPL": "triton", **c, "USE_TMA": r["USE_TMA"], "SPLIT_K": 2, "SPLIT_REDUCE": r["variant"]}


def _variant_key(c: dict[str, Any]) -> tuple[Any, ...]:
    names = ("IMPL", "BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps")
    return (
        *(c[n] for n in names),
        c.get("USE_TMA"),
        c.get("FLATTEN"),
        c.get("TMA_STORE"),
        c.get("SPLIT_REDUCE"),
    )


def test_variant_space_matches_sm90_probe() -> None:
    """The constraints of the fused split-K and persistent kernels against their sm_90 compiles
    (bench/smem_probe.py --variants): admitted exactly when it compiled, fits and does not spill; every
    admitted config of those kernels covered by a fitting compile."""
    from autotune.env import DEVICE_PRESETS
    from autotune.space import Space

    probe = json.loads(VARIANT_PROBE_FILE.read_text())
    h200 = DEVICE_PRESETS["h200"]
    limit = h200["smem_per_block"]
    space = Space.from_yaml(SPACE_FILE)
    good: set[tuple[Any, ...]] = set()
    rows = probe["rows"]
    assert len([r for r in rows if r["kind"] in ("fused", "atomic", "persistent")]) >= 650
    for r in rows:
        if r["kind"].startswith("atomic"):
            continue  # not offered by the space (it raced on the H200); its probe rows stay on record
        cfg = _variant_config(r)
        admitted = not any(n in v for v in space.check(cfg, h200) for n in VARIANT_RESOURCES)
        fits = r["ok"] and r["shared"] <= limit and not r.get("spill_stores") and not r.get("spill_loads")
        if r["kind"].endswith("_ragged_k"):  # masked loads at the most stages that fit: admitted ones fit
            assert fits or not admitted, r
            continue
        assert admitted == fits, r
        if fits:
            good.add(_variant_key(cfg))
    admitted_cfgs = [
        c
        for c in space.enumerate(h200)
        if c["IMPL"] == "persistent" or c.get("SPLIT_REDUCE") in ("fused", "atomic")
    ]
    missing = [c for c in admitted_cfgs if _variant_key(c) not in good]
    assert not missing, f"{len(missing)} admitted configs without a fitting sm_90 compile, e.g. {missing[0]}"


def _smem_estimate(c: dict[str, Any]) -> int:
    pipeline = c["num_stages"] * ((c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] + 8)
    return max(pipeline, 4 * c["BLOCK_M"] * c["BLOCK_N"] if c["SPLIT_K"] > 1 else 0)


@pytest.mark.triton
def test_admitted_configs_fit_shared_memory_on_sm90() -> None:
    """The constraint's formula against Triton's own sm_90 compiles of the configs nearest the limit."""
    pytest.importorskip("autotune.space")
    res = _subprocess("--xcompile", interpret=False)
    if res.get("skip"):
        pytest.skip(res["skip"])
    limit = res["limit"]
    for r in res["results"]:
        assert r["shared"] <= limit, r
        assert r["shared"] <= r["estimate"], r  # the formula is exact or conservative
    assert res["rejected"]["shared"] > limit  # and the example it rejects really does not fit
    assert res["rejected_persistent"]["shared"] > limit
    kinds = {
        r["config"].get("IMPL", "triton") + str(r["config"].get("SPLIT_REDUCE", "")) for r in res["results"]
    }
    assert {"persistent", "tritonfused"} <= kinds  # atomic split-K is not offered by the space any more
    fused, atomic = res["sync"]["fused"], res["sync"]["atomic"]
    for m in (fused, atomic):
        assert m["acq_rel_atomics"] == 1 and m["barrier_before_bump"], res["sync"]
    assert fused["cg_loads"] > 0 and fused["fp32_atomics"] == []
    assert atomic["cg_loads"] > 0 and atomic["fp32_atomics"] == ["atom.global.gpu.relaxed.add.v4.f32"]


# ---- subprocess side ----------------------------------------------------------------------------------


def _run_interp_big() -> dict[str, Any]:
    import torch

    from autotune.kernel.contract import load_kernel_file

    kernel = load_kernel_file(KERNEL_FILE).kernel
    torch.manual_seed(0)
    inputs = {tuple(s.values()): kernel.make_inputs(s, "cpu") for s in (BIG, BIG8, ROWS)}
    refs = {k: kernel.reference(v) for k, v in inputs.items()}
    cases: dict[str, str | None] = {}
    for case, (shape, over) in BIG_CASES.items():
        key = tuple(shape.values())
        config = _config(kernel.default_config, over)
        cases[case] = kernel.compare(kernel.compile(config, inputs[key])(), refs[key])
    return cases


def _run_interp() -> dict[str, Any]:
    import torch

    from autotune.kernel.conformance import check_kernel_file
    from autotune.kernel.contract import load_kernel_file

    kernel = load_kernel_file(KERNEL_FILE).kernel
    mod = sys.modules[type(kernel).__module__]
    torch.manual_seed(0)
    inputs = {tuple(s.values()): kernel.make_inputs(s, "cpu") for s in (RAGGED, RAGGED16, EVEN)}
    refs = {k: kernel.reference(v) for k, v in inputs.items()}
    cases: dict[str, str | None] = {}
    for case, (shape, over) in CASES.items():
        key = tuple(shape.values())
        if key not in inputs:
            inputs[key] = kernel.make_inputs(shape, "cpu")
            refs[key] = kernel.reference(inputs[key])
        config = _config(kernel.default_config, over)
        # compile() runs the config once; the output checked is the second call's (fused: counters reset)
        cases[case] = kernel.compare(kernel.compile(config, inputs[key])(), refs[key])

    inp, ref = inputs[tuple(RAGGED.values())], refs[tuple(RAGGED.values())]
    sk1 = {**kernel.default_config, **CASES["ragged-ptr-sk1"][1]}
    a = inp.a.clone()
    a[:, 160:192] = 0  # the kernel never sees one BLOCK_K slice of K
    neg = {"dropped-k-tile": kernel.compile(sk1, mod.GemmInputs(a, inp.b, inp.scale_a, inp.scale_b))()}
    # split-K whose reduction forgets the first split's partial sums
    M, N = RAGGED["M"], RAGGED["N"]
    out, ws = torch.empty(M, N, dtype=torch.bfloat16), torch.empty(4, M, N)
    mod.launcher({**sk1, "SPLIT_K": 4}, inp.a, inp.b, inp.scale_a, inp.scale_b, out, ws)()
    neg["dropped-split"] = (ws[1:].sum(0) * inp.scale_a * inp.scale_b).to(torch.bfloat16)
    one = torch.ones((), dtype=torch.float32)
    neg["dropped-scale"] = kernel.compile(sk1, mod.GemmInputs(inp.a, inp.b, one, inp.scale_b))()
    bad = kernel.compile(sk1, inp)().clone()
    bad[17, 42] += 1.0  # about one output RMS
    neg["one-bad-element"] = bad
    # fused split-K with a counter left at 1 (e.g. by an interrupted call): the tile is finished one
    # partial early. Shows the counters must start at zero, and that the check sees the difference.
    fcfg = {**sk1, "SPLIT_K": 4, "SPLIT_REDUCE": "fused"}
    fws = mod.make_workspace(fcfg, M, N, "cpu")
    fws[4 * M * N :].view(torch.int32)[0] = 1
    neg["fused-stale-counter"] = mod.launcher(
        fcfg, inp.a, inp.b, inp.scale_a, inp.scale_b, out.clone(), fws
    )()
    negative = {name: kernel.compare(o, ref) is not None for name, o in neg.items()}

    # Fused split-K: every call leaves the counters at zero, and repeated calls give identical bits
    # (partials summed in split order, whichever program arrives last).
    fws = mod.make_workspace(fcfg, M, N, "cpu")
    fout = torch.empty(M, N, dtype=torch.bfloat16)
    run = mod.launcher(fcfg, inp.a, inp.b, inp.scale_a, inp.scale_b, fout, fws)
    first = run().clone()
    again = [run().clone() for _ in range(2)]
    fused_repeat = {
        "counters_zero": bool((fws[4 * M * N :].view(torch.int32) == 0).all()),
        "identical": all(torch.equal(first, o) for o in again),
        "check": kernel.compare(first, ref),
        # the same tiles reduced by the second kernel: the same sums in the same order
        "equals_kernel_reduce": torch.equal(first, kernel.compile({**fcfg, "SPLIT_REDUCE": "kernel"}, inp)()),
    }
    # Atomic split-K: every call leaves the sums and the counters zero, and each output passes
    acfg = {**fcfg, "SPLIT_REDUCE": "atomic"}
    aws = mod.make_workspace(acfg, M, N, "cpu")
    run = mod.launcher(
        acfg, inp.a, inp.b, inp.scale_a, inp.scale_b, torch.empty(M, N, dtype=torch.bfloat16), aws
    )
    atomic_repeat = {
        "checks": [kernel.compare(run(), ref) for _ in range(3)],
        "ws_zero": bool((aws == 0).all()),
    }

    # A config without IMPL (every config of the earlier spaces) runs the original kernel: the same bits
    # as IMPL=triton, timed by the same names.
    legacy = {k: v for k, v in {**sk1, "SPLIT_K": 2}.items() if k != "IMPL"}
    legacy_out = kernel.compile(legacy, inp)()
    no_impl = {
        "same_bits": torch.equal(legacy_out, kernel.compile({**legacy, "IMPL": "triton"}, inp)()),
        "timed": list(kernel.timed_kernels(legacy)),
    }

    # gemm_fp8() honours IMPL: which named CPU range ran
    ran = {}
    for label, cfg in (
        ("triton", sk1),
        ("fused", fcfg),
        ("atomic", {**fcfg, "SPLIT_REDUCE": "atomic"}),
        ("persistent", {"IMPL": "persistent", **SMALL, "FLATTEN": True, "TMA_STORE": False}),
        ("scaled_mm", {"IMPL": "scaled_mm"}),
    ):
        e = inputs[tuple(EVEN.values())]
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            o = mod.gemm_fp8(e.a, e.b, e.scale_a, e.scale_b, cfg)
        names = {ev.name for ev in prof.events()}
        ran[label] = {
            "kernels": sorted(n for n in names if n.startswith(("_autotune_gemm_fp8", "nvjet"))),
            "check": kernel.compare(o, refs[tuple(EVEN.values())]),
        }
    # ... and falls back to the default config where the chosen implementation cannot run the shape
    r = inputs[tuple(RAGGED.values())]
    fallback = kernel.compare(mod.gemm_fp8(r.a, r.b, r.scale_a, r.scale_b, {"IMPL": "scaled_mm"}), ref)

    try:
        kernel.compile({**sk1, "USE_TMA": True}, inp)
        tma_unaligned = "accepted"
    except ValueError as exc:
        tma_unaligned = str(exc)
    failed = [
        f"{c.name}: {c.detail}"
        for c in check_kernel_file(KERNEL_FILE, "cpu", RAGGED, time_it=False)
        if not c.ok
    ]
    return {
        "cases": cases,
        "negative": negative,
        "tma_unaligned": tma_unaligned,
        "conformance": "; ".join(failed) or None,
        "fused_repeat": fused_repeat,
        "atomic_repeat": atomic_repeat,
        "no_impl": no_impl,
        "gemm_fp8_ran": ran,
        "fallback": fallback,
    }


def _run_xcompile() -> dict[str, Any]:
    """Compile for sm_90 without a GPU (Triton 3.6: triton.compile(ASTSource, target=GPUTarget)), with the
    argument specialization the JIT would use for a 4096x7168x2048 problem."""
    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature
    from triton.tools.tensor_descriptor import TensorDescriptor

    from autotune.env import DEVICE_PRESETS
    from autotune.kernel.contract import load_kernel_file
    from autotune.space import Space

    target = GPUTarget("cuda", 90, 32)
    try:
        backend = make_backend(target)
    except Exception as exc:  # a triton build without the CUDA backend
        return {"skip": f"no CUDA backend to cross-compile with: {exc}"}
    mod = sys.modules[type(load_kernel_file(KERNEL_FILE).kernel).__module__]
    fn = mod._autotune_gemm_fp8_kernel

    def shared(c: dict[str, Any], M: int = 4096, N: int = 7168, K: int = 2048) -> int:
        a, b = torch.empty(M, K, dtype=torch.float8_e4m3fn), torch.empty(N, K, dtype=torch.float8_e4m3fn)
        bm, bn, bk = c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"]
        if c["USE_TMA"]:
            a, b = (
                TensorDescriptor(a, [M, K], [K, 1], [bm, bk]),
                TensorDescriptor(b, [N, K], [K, 1], [bn, bk]),
            )
        c_out, f32 = torch.empty(M, N, dtype=torch.bfloat16), torch.empty(1)
        args = (a, b, c_out, f32, f32, f32, M, N, K, K, K, N)
        kw = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=c["GROUP_M"], SPLIT_K=c["SPLIT_K"])
        kw |= dict(USE_TMA=bool(c["USE_TMA"]), EVEN_K=K % bk == 0, num_stages=c["num_stages"])
        kw |= dict(num_warps=c["num_warps"], debug=False, instrumentation_mode="")
        bound, spec, options = create_function_from_signature(fn.signature, fn.params, backend)(*args, **kw)
        options, sig, constexprs, attrs = fn._pack_args(backend, kw, bound, spec, options)
        compiled = triton.compile(
            ASTSource(fn, sig, constexprs, attrs), target=target, options=options.__dict__
        )
        return int(compiled.metadata.shared)

    h200 = DEVICE_PRESETS["h200"]
    configs = list(Space.from_yaml(SPACE_FILE).enumerate(h200))
    # The largest estimates of each kind: pipeline-bound with/without TMA, epilogue-bound (split-K).
    picks: list[dict[str, Any]] = []
    main = [c for c in configs if c["IMPL"] == "triton" and c.get("SPLIT_REDUCE") != "fused"]
    for pred in (
        lambda c: c["USE_TMA"] and c["SPLIT_K"] == 1,
        lambda c: not c["USE_TMA"] and c["SPLIT_K"] > 1,
        lambda c: (
            c["SPLIT_K"] > 1
            and 4 * c["BLOCK_M"] * c["BLOCK_N"]
            > c["num_stages"] * (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"]
        ),
    ):
        picks += sorted(filter(pred, main), key=_smem_estimate, reverse=True)[:2]
    results = [{"config": c, "estimate": _smem_estimate(c), "shared": shared(c)} for c in picks]
    rejected = dict(picks[0], BLOCK_M=128, BLOCK_N=256, BLOCK_K=128, num_stages=5, num_warps=8, SPLIT_K=1)

    # The new kernels through bench/smem_probe.py's compile (the persistent one with FLATTEN's epilogue
    # buffer, the fused split-K), the admitted configs nearest the limit.
    sys.path.insert(0, str(ROOT))
    from bench import smem_probe

    smem_probe.init_worker(tempfile.mkdtemp(prefix="gemm_fp8_xcompile_"))

    def probe_row(c: dict[str, Any]) -> dict[str, Any]:
        variant = "persistent" if c["IMPL"] == "persistent" else c["SPLIT_REDUCE"]
        row = {**c, **smem_probe.PROBLEM, "variant": variant, "USE_TMA": c.get("USE_TMA", True)}
        row |= {"SPLIT_K": c.get("SPLIT_K", 1), "FLATTEN": c.get("FLATTEN", False)}
        return row

    for pred in (
        lambda c: c["IMPL"] == "persistent" and c["FLATTEN"] and not c["TMA_STORE"],
        lambda c: c["IMPL"] == "persistent" and c["TMA_STORE"],
        lambda c: c.get("SPLIT_REDUCE") == "fused",
        lambda c: c.get("SPLIT_REDUCE") == "atomic",
    ):
        for c in sorted(filter(pred, configs), key=lambda c: smem_probe.smem_model(probe_row(c)))[-2:]:
            got = smem_probe.compile_one(probe_row(c))
            results.append(
                {"config": c, "estimate": smem_probe.smem_model(probe_row(c)), "shared": got.get("shared")}
            )
    # The one-launch split-K's synchronization as compiled for sm_90: the counter bump is one acq_rel
    # atomic at GPU scope after a CTA barrier, the last program reads the partials from L2 (ld.global.cg),
    # and the atomic reduction adds with vectorized relaxed fp32 atomics.
    import re

    from triton.compiler import ASTSource as _AST
    from triton.runtime.jit import create_function_from_signature as _sig

    ffn = mod._autotune_gemm_fp8_splitk_fused
    sync: dict[str, Any] = {}
    for mode in ("fused", "atomic"):
        M, N, K = 64, 2112, 7168
        a, b = torch.empty(M, K, dtype=torch.float8_e4m3fn), torch.empty(N, K, dtype=torch.float8_e4m3fn)
        f32, cnt = torch.empty(1), torch.empty(1, dtype=torch.int32)
        args = (a, b, torch.empty(M, N, dtype=torch.bfloat16), f32, cnt, f32, f32, M, N, K, K, K, N)
        kw = dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, SPLIT_K=4, USE_TMA=False, EVEN_K=True)
        kw |= dict(ATOMIC=mode == "atomic", num_stages=4, num_warps=4, debug=False, instrumentation_mode="")
        bound, spec, options = _sig(ffn.signature, ffn.params, backend)(*args, **kw)
        options, sig, constexprs, attrs = ffn._pack_args(backend, kw, bound, spec, options)
        ptx = triton.compile(_AST(ffn, sig, constexprs, attrs), target=target, options=options.__dict__).asm[
            "ptx"
        ]
        bump = ptx.index("atom.global.gpu.acq_rel.add.u32")
        sync[mode] = {
            "acq_rel_atomics": len(re.findall(r"atom\.global\.gpu\.acq_rel", ptx)),
            "barrier_before_bump": "bar.sync" in ptx[max(0, bump - 400) : bump],
            "cg_loads": len(re.findall(r"ld\.global\.cg", ptx)),
            "fp32_atomics": sorted(set(re.findall(r"atom\.global\.gpu\.relaxed\.add\.[\w.]*f32", ptx))),
        }

    big = probe_row({"IMPL": "persistent", "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 128, "GROUP_M": 8})
    big |= {"num_stages": 5, "num_warps": 8, "FLATTEN": True, "TMA_STORE": False}
    return {
        "limit": h200["smem_per_block"],
        "results": results,
        "rejected": {"config": rejected, "shared": shared(rejected)},
        "rejected_persistent": {"config": big, "shared": smem_probe.compile_one(big).get("shared")},
        "sync": sync,
    }


def _run_best_config() -> dict[str, Any]:
    """gemm_fp8() without a config, looking up AUTOTUNE_DB's best config for the shape."""
    import torch

    from autotune import best_config
    from autotune.kernel.contract import load_kernel_file

    kernel = load_kernel_file(KERNEL_FILE).kernel
    mod = sys.modules[type(kernel).__module__]
    inp = kernel.make_inputs({"M": 32, "N": 48, "K": 64}, "cpu")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        out = mod.gemm_fp8(inp.a, inp.b, inp.scale_a, inp.scale_b)
    names = sorted({e.name for e in prof.events() if e.name.startswith(("_autotune_gemm_fp8", "nvjet"))})
    return {
        "config": best_config("gemm_fp8", M=32, N=48, K=64),
        "kernels": names,
        "check": kernel.compare(out, kernel.reference(inp)),
    }


if __name__ == "__main__":
    modes = {
        "--interp": _run_interp,
        "--interp-big": _run_interp_big,
        "--xcompile": _run_xcompile,
        "--best-config": _run_best_config,
    }
    result = modes[sys.argv[1]]()
    print(json.dumps(result))
