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
}
# The space's larger values (BLOCK_*=256, GROUP_M 1 and 32, 2 and 6 stages; slow in the interpreter). The
# interpreter ignores num_stages and num_warps, so those run here for the launch path only; the GPU side of
# every value is bench/smem_probe.py's sm_90 compiles.
BIG = {"M": 260, "N": 300, "K": 528}  # ragged against every tile; K % 16 == 0 for TMA, 3 K tiles of 256
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
    "rows-group1": (ROWS, {**SMALL, "BLOCK_M": 16, "BLOCK_N": 16, "GROUP_M": 1}),
    "rows-group32": (ROWS, {**SMALL, "BLOCK_M": 16, "BLOCK_N": 16, "GROUP_M": 32, "num_stages": 6}),
}
PROBE_FILE = ROOT / "bench" / "results" / "smem_probe_sm90.json"
# Broken variants that KERNEL.compare must reject.
NEGATIVE = ("dropped-k-tile", "dropped-split", "dropped-scale", "one-bad-element")


def _subprocess(mode: str, interpret: bool, timeout: float = 300) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run(
        [sys.executable, __file__, mode], capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout
    )
    if proc.returncode != 0:
        raise AssertionError(f"{mode} subprocess failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def interp() -> dict[str, Any]:
    return _subprocess("--interp", interpret=True)


@pytest.mark.parametrize("case", list(CASES))
def test_matches_reference_in_interpreter(interp: dict[str, Any], case: str) -> None:
    assert interp["cases"][case] is None, interp["cases"][case]


@pytest.fixture(scope="module")
def interp_big() -> dict[str, Any]:
    return _subprocess("--interp-big", interpret=True)


@pytest.mark.slow
@pytest.mark.parametrize("case", list(BIG_CASES))
def test_large_values_match_reference_in_interpreter(interp_big: dict[str, Any], case: str) -> None:
    assert interp_big[case] is None, interp_big[case]


@pytest.mark.parametrize("variant", NEGATIVE)
def test_compare_catches_broken_variant(interp: dict[str, Any], variant: str) -> None:
    assert interp["negative"][variant], f"{variant} passed the correctness check"


def test_conforms_in_interpreter(interp: dict[str, Any]) -> None:
    assert interp["conformance"] is None, interp["conformance"]


def test_tma_rejects_unaligned_k(interp: dict[str, Any]) -> None:
    assert "K % 16" in interp["tma_unaligned"]


def test_declaration() -> None:
    from autotune.kernel import load_kernel_file

    k = load_kernel_file(KERNEL_FILE)
    assert k.name == "gemm_fp8" and Path(k.space_source) == SPACE_FILE
    kern = k.kernel
    assert kern.kernel_names == ("_autotune_gemm_fp8_kernel",)
    assert k.timed_kernels({**kern.default_config, "SPLIT_K": 1}) == ("_autotune_gemm_fp8_kernel",)
    assert k.timed_kernels({**kern.default_config, "SPLIT_K": 4}) == (
        "_autotune_gemm_fp8_kernel",
        "_autotune_gemm_fp8_splitk_reduce",
    )
    shapes = k.default_shapes()
    assert len(shapes) == 18 and len({tuple(s.values()) for s in shapes}) == 18
    assert {"M": 64, "N": 2112, "K": 7168} in shapes and {"M": 4096, "N": 7168, "K": 16384} in shapes
    assert kern.flops({"M": 2, "N": 3, "K": 5}) == 60
    assert kern.bytes_moved({"M": 2, "N": 3, "K": 5}) == 10 + 15 + 12


def test_space_on_h200() -> None:
    space_mod = pytest.importorskip("autotune.space")
    from autotune.env import DEVICE_PRESETS
    from autotune.kernel import load_kernel_file

    h200 = DEVICE_PRESETS["h200"]
    space = space_mod.Space.from_yaml(SPACE_FILE)
    default = dict(load_kernel_file(KERNEL_FILE).kernel.default_config)
    assert space.check(default, h200) == []
    assert set(space.names) == set(default)
    # 5 * (128 + 256) * 128 = 245,760 B of pipeline buffers > 232,448 B
    too_big = {**default, "BLOCK_N": 256, "num_stages": 5, "num_warps": 8}
    assert any("smem_fits" in p for p in space.check(too_big, h200))
    assert space.check({**too_big, "num_stages": 4}, h200) == []
    assert any("tma_needs_hopper" in p for p in space.check({**default, "USE_TMA": True}, {**h200, "cc": 80}))
    # 256 accumulator floats per thread spill (bench/results/smem_probe_sm90.json); 128 do not
    wide = {**default, "BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64}
    assert space.check(wide, h200) == []
    assert any("acc_fits_registers" in p for p in space.check({**wide, "num_warps": 4}, h200))
    assert any("acc_fits_registers" in p for p in space.check({**wide, "BLOCK_N": 256}, h200))
    small = {**default, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 256, "GROUP_M": 1, "num_stages": 6}
    assert space.check(small, h200) == []
    split = {**small, "GROUP_M": 8, "SPLIT_K": 8, "USE_TMA": True}
    assert space.check(split, h200) == []
    assert any("split_k_for_small_m" in p for p in space.check({**split, "BLOCK_M": 128}, h200))
    assert any("split_k_for_small_m" in p for p in space.check({**split, "GROUP_M": 32}, h200))
    assert 1000 <= space.count(h200) <= 1500  # the GPU landscape times every valid config


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
        cfg = {n: r[n] for n in space.names}
        admitted = not any(name in v for v in space.check(cfg, h200) for name in resources)
        fits = r["ok"] and r["shared"] <= limit and not r.get("spill_stores") and not r.get("spill_loads")
        assert admitted == fits, r
        if fits:
            good.add(_probe_key(r))
    # masked (ragged-K) pointer loads at the most stages that fit: same bytes, no spills either
    for r in (r for r in probe["rows"] if r["kind"] == "ragged_k"):
        assert r["ok"] and r["shared"] <= limit and not r.get("spill_stores"), r
    missing = [c for c in space.enumerate(h200) if _probe_key(c) not in good]
    assert not missing, f"{len(missing)} admitted configs without a fitting sm_90 compile, e.g. {missing[0]}"


def _smem_estimate(c: dict[str, Any]) -> int:
    pipeline = c["num_stages"] * ((c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] + 8)
    return max(pipeline, 4 * c["BLOCK_M"] * c["BLOCK_N"] if c["SPLIT_K"] > 1 else 0)


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


# ---- subprocess side ----------------------------------------------------------------------------------


def _run_interp_big() -> dict[str, Any]:
    import torch

    from autotune.kernel import load_kernel_file

    kernel = load_kernel_file(KERNEL_FILE).kernel
    torch.manual_seed(0)
    inputs = {tuple(s.values()): kernel.make_inputs(s, "cpu") for s in (BIG, ROWS)}
    refs = {k: kernel.reference(v) for k, v in inputs.items()}
    cases: dict[str, str | None] = {}
    for case, (shape, over) in BIG_CASES.items():
        key = tuple(shape.values())
        config = {**kernel.default_config, **over}
        cases[case] = kernel.compare(kernel.compile(config, inputs[key])(), refs[key])
    return cases


def _run_interp() -> dict[str, Any]:
    import torch

    from autotune.conformance import check_kernel_file
    from autotune.kernel import load_kernel_file

    kernel = load_kernel_file(KERNEL_FILE).kernel
    mod = sys.modules[type(kernel).__module__]
    torch.manual_seed(0)
    inputs = {tuple(s.values()): kernel.make_inputs(s, "cpu") for s in (RAGGED, RAGGED16, EVEN)}
    refs = {k: kernel.reference(v) for k, v in inputs.items()}
    cases: dict[str, str | None] = {}
    for case, (shape, over) in CASES.items():
        key = tuple(shape.values())
        config = {**kernel.default_config, **over}
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
    negative = {name: kernel.compare(o, ref) is not None for name, o in neg.items()}

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
    from autotune.kernel import load_kernel_file
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
    for pred in (
        lambda c: c["USE_TMA"] and c["SPLIT_K"] == 1,
        lambda c: not c["USE_TMA"] and c["SPLIT_K"] > 1,
        lambda c: (
            c["SPLIT_K"] > 1
            and 4 * c["BLOCK_M"] * c["BLOCK_N"]
            > c["num_stages"] * (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"]
        ),
    ):
        picks += sorted(filter(pred, configs), key=_smem_estimate, reverse=True)[:2]
    results = [{"config": c, "estimate": _smem_estimate(c), "shared": shared(c)} for c in picks]
    rejected = dict(picks[0], BLOCK_M=128, BLOCK_N=256, BLOCK_K=128, num_stages=5, num_warps=8, SPLIT_K=1)
    return {
        "limit": h200["smem_per_block"],
        "results": results,
        "rejected": {"config": rejected, "shared": shared(rejected)},
    }


if __name__ == "__main__":
    modes = {"--interp": _run_interp, "--interp-big": _run_interp_big, "--xcompile": _run_xcompile}
    result = modes[sys.argv[1]]()
    print(json.dumps(result))
