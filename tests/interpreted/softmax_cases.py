"""examples/softmax.py's kernel and the TritonKernel helper (autotune/triton_kernel.py), run by
tests/test_softmax_example.py in a pytest process started under TRITON_INTERPRET=1."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("run by tests/test_softmax_example.py under TRITON_INTERPRET=1", allow_module_level=True)

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton", exc_type=ImportError)

from autotune.kernel.conformance import assert_conforms  # noqa: E402
from autotune.kernel.contract import _import_file, load_kernel_file  # noqa: E402
from autotune.kernel.triton import TritonKernel, jit_function  # noqa: E402
from autotune.space import Space  # noqa: E402
from autotune.space.triton import config_dict, space_from_configs  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ROOT / "examples" / "softmax.py"


@pytest.fixture(scope="module")
def mod() -> Any:
    return _import_file(SOFTMAX)


def run_config(mod: Any, x: Any, config: dict[str, Any]) -> Any:
    out = torch.empty_like(x)
    mod.softmax_kernel[(x.shape[0],)](out, x, x.stride(0), out.stride(0), *x.shape, **config)
    return out


@pytest.mark.parametrize("dtype", ["float16", "float32"])
# one block, exact blocks, ragged, many blocks
@pytest.mark.parametrize("cols", [1, 17, 256, 300, 1000, 2049])
def test_every_block_size_matches_torch(mod, dtype: str, cols: int) -> None:
    x = 4 * torch.randn(3, cols, dtype=getattr(torch, dtype))
    ref = torch.softmax(x.float(), dim=-1)
    for block in sorted({c.kwargs["BLOCK_SIZE"] for c in mod.CONFIGS}):
        out = run_config(mod, x, {"BLOCK_SIZE": block, "num_warps": 4, "num_stages": 2})
        assert out.dtype == x.dtype
        assert torch.allclose(out.float(), ref, rtol=1e-2, atol=1e-3), (
            block,
            (out.float() - ref).abs().max(),
        )


def test_large_values_and_a_strided_input_stay_finite(mod) -> None:
    base = torch.randn(4, 2 * 700, dtype=torch.float32) * 1e4  # exp would overflow without the max
    x = base[:, ::2].contiguous()[:, :700]
    wide = torch.zeros(4, 800)
    wide[:, :700] = x
    view = wide[:, :700]  # row stride 800 != n_cols
    ref = torch.softmax(x, dim=-1)
    for block in (256, 1024):
        out = torch.empty_like(x)
        mod.softmax_kernel[(4,)](out, view, view.stride(0), out.stride(0), 4, 700, BLOCK_SIZE=block)
        assert torch.isfinite(out).all() and torch.allclose(out, ref, atol=1e-6)


def test_kernel_file_conforms(mod) -> None:
    assert_conforms(SOFTMAX, "cpu", {"n_rows": 8, "n_cols": 300})


def test_helper_declares_the_contract(mod) -> None:
    k = mod.KERNEL
    assert k.name == "softmax" and k.kernel_names == ("softmax_kernel",)
    assert k.shape_params == ("n_rows", "n_cols") and k.default_config == config_dict(mod.CONFIGS[0])
    assert k.space == space_from_configs(mod.CONFIGS, "softmax")
    loaded = load_kernel_file(SOFTMAX)
    assert Space.from_dict(loaded.space_def).count() == len(mod.CONFIGS) == 69


def test_helper_compiles_any_config_of_the_space(mod) -> None:
    k = mod.KERNEL
    inputs = k.make_inputs({"n_rows": 5, "n_cols": 700}, "cpu")
    ref = k.reference(inputs)
    for c in (mod.CONFIGS[0], mod.CONFIGS[len(mod.CONFIGS) // 2], mod.CONFIGS[-1]):
        run = k.compile(config_dict(c), inputs)
        assert k.compare(run(), ref) is None
    # a wrong output is caught by the default comparison
    bad = run().clone()
    bad[0, 0] += 0.5
    assert k.compare(bad, ref) is not None


def test_helper_unwraps_decorators_and_takes_their_configs(mod) -> None:
    assert jit_function(mod.softmax_dropin) is mod.softmax_kernel
    assert jit_function(mod.softmax_autotuned) is mod.softmax_kernel
    assert jit_function(mod.softmax_kernel) is mod.softmax_kernel
    k = TritonKernel(
        mod.softmax_dropin,  # brings its configs
        name="softmax2",
        inputs=lambda shape, device: {"x": torch.randn(shape["n_rows"], shape["n_cols"])},
        output=lambda i: torch.empty_like(i["x"]),
        # by name, and a fixed grid
        args=lambda i, out: {
            "out_ptr": out,
            "in_ptr": i["x"],
            "in_stride": i["x"].stride(0),
            "out_stride": out.stride(0),
            "n_rows": 3,
            "n_cols": 50,
        },
        grid=(3,),
        reference=lambda i: torch.softmax(i["x"], dim=-1),
        shapes=[{"n_rows": 3, "n_cols": 50}],
        flops=lambda s: 1.0,
    )
    assert k.configs == mod.CONFIGS
    inputs = k.make_inputs({"n_rows": 3, "n_cols": 50}, "cpu")
    assert k.compare(k.compile({"BLOCK_SIZE": 64}, inputs)(), k.reference(inputs)) is None


def test_helper_needs_configs_or_a_space(mod) -> None:
    with pytest.raises(ValueError, match="configs= .* or space="):
        TritonKernel(
            mod.softmax_kernel,
            name="x",
            inputs=None,
            output=None,
            args=None,
            grid=(1,),
            reference=None,
            shapes=[{"n": 1}],
            flops=None,
        )


def test_module_softmax_runs_through_the_dropin(mod, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("AUTOTUNE_DB", str(tmp_path / "empty.db"))
    from autotune.runtime import lookup

    lookup.clear_cache()
    x = torch.randn(6, 3000, dtype=torch.float32)
    y = mod.softmax(x)
    assert torch.allclose(y, torch.softmax(x, -1), atol=1e-6)
    assert mod.softmax_dropin.last_source == "first"


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_module_softmax_triton_runs_in_the_interpreter(mod, dtype: str) -> None:
    """Plain ``@triton.autotune`` over the same configs: its benchmarker needs a GPU driver, so the example
    gives it a wall-clock one under the interpreter."""
    x = torch.randn(3, 300, dtype=getattr(torch, dtype))
    y = mod.softmax_triton(x)
    assert y.dtype == x.dtype
    assert torch.allclose(y.float(), torch.softmax(x.float(), -1), rtol=1e-2, atol=1e-3)
    assert mod.softmax_autotuned.best_config in mod.CONFIGS
