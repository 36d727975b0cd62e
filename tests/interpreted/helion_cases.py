"""HelionKernel (autotune/kernel/helion.py) and the @helion.kernel drop-in (autotune/runtime/helion.py) on
the examples' kernels, run by tests/test_helion.py in a pytest process started under TRITON_INTERPRET=1."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("run by tests/test_helion.py under TRITON_INTERPRET=1", allow_module_level=True)

torch = pytest.importorskip("torch")
helion = pytest.importorskip("helion")

from autotune.engine.faults import classify  # noqa: E402
from autotune.kernel.contract import load_kernel_file  # noqa: E402
from autotune.kernel.helion import InvalidConfig, flat_config, generation  # noqa: E402
from autotune.space import Space  # noqa: E402
from autotune.trial import TrialStatus  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RMS = ROOT / "examples" / "helion_rms_norm.py"
MATMUL = ROOT / "examples" / "helion_matmul.py"
SMALL = {"M": 32, "N": 64}


@pytest.fixture(scope="module")
def rms() -> Any:
    loaded = load_kernel_file(RMS)
    loaded.kernel.default_shapes = [SMALL]  # a CPU-sized space (the file's shapes are a GPU's)
    loaded.kernel._derived = None
    return loaded.kernel


def test_the_space_is_helions_config_spec_flattened(rms: Any) -> None:
    space = Space.from_dict(rms.space)
    inputs = rms.make_inputs(SMALL, "cpu")
    spec = rms.fn.bind(inputs).config_spec
    names = set(space.names)
    # every list entry of Helion's default config that it tunes is an indexed parameter
    assert {"block_sizes_0", "num_warps", "num_stages", "pid_type", "indexing_0"} <= names
    assert space.param("block_sizes_0").choices == tuple(
        sorted(set(space.param("block_sizes_0").choices))
    )  # ordered: the auto strategy reads it as an ordinal
    assert max(space.param("block_sizes_0").choices) <= max(b.max_size for b in spec.block_sizes)
    # knobs of the persistent loop exist only with a persistent pid_type (Helion resets them otherwise)
    persistent = space.param("num_sm_multiplier")
    assert persistent.when is not None and "persistent" in persistent.when
    assert space.names.index("pid_type") < space.names.index("num_sm_multiplier")
    # the default config is Helion's and valid in the space
    assert space.check(rms.default_config, {}) == []
    gen = generation(rms.fn.bind(inputs))
    helion_default = flat_config(spec.default_config(), gen)
    assert all(helion_default[k] == v for k, v in rms.default_config.items() if k in helion_default)


def test_the_space_hash_follows_helions_spec(rms: Any) -> None:
    again = load_kernel_file(RMS).kernel
    again.default_shapes, again._derived = [SMALL], None
    assert Space.from_dict(again.space).hash() == Space.from_dict(rms.space).hash()
    wider = load_kernel_file(RMS).kernel
    wider.default_shapes, wider._derived = [{"M": 256, "N": 64}], None  # larger block sizes allowed
    assert Space.from_dict(wider.space).hash() != Space.from_dict(rms.space).hash()


def test_the_timed_kernel_is_the_generated_triton_kernel(rms: Any) -> None:
    assert rms.kernel_names == ("_helion_rms_norm",)


def test_valid_configs_compile_and_match_the_reference(rms: Any) -> None:
    space = Space.from_dict(rms.space)
    inputs = rms.make_inputs(SMALL, "cpu")
    ref = rms.reference(inputs)
    rng = random.Random(0)
    ran = 0
    for _ in range(40):
        config = space.sample(rng, {})
        if config.get("pid_type", "flat") != "flat":
            continue  # a persistent kernel asks the device for its SM count: not on a CPU
        try:
            launcher = rms.compile(config, inputs)
        except InvalidConfig:
            continue
        assert rms.compare(launcher(), ref) is None, config
        ran += 1
        if ran == 3:
            break
    assert ran == 3


def test_a_config_helion_would_repair_is_invalid_and_never_compiled(rms: Any) -> None:
    inputs = rms.make_inputs(SMALL, "cpu")
    bad = {**rms.default_config, "reduction_loops_0": 64}  # a reduction loop as long as the row is None
    with pytest.raises(InvalidConfig, match="reduction_loops_0") as e:
        rms.compile(bad, inputs)
    assert classify(e.value, "compile").status is TrialStatus.INVALID
    with pytest.raises(InvalidConfig, match="not entries"):
        rms.compile({**rms.default_config, "BLOCK_M": 64}, inputs)


def test_the_matmul_example_compiles_its_default_and_matches() -> None:
    k = load_kernel_file(MATMUL).kernel
    k.default_shapes, k._derived = [{"M": 32, "N": 32, "K": 64}], None
    space = Space.from_dict(k.space)
    assert {"block_sizes_2", "loop_orders_0", "l2_groupings_0"} <= set(space.names)
    inputs = k.make_inputs({"M": 32, "N": 32, "K": 64}, "cpu")
    assert k.compare(k.compile(k.default_config, inputs)(), k.reference(inputs)) is None


# ------------------------------------------------------------------ the drop-in


def _dropin(db: str, **kw: Any) -> Any:
    from autotune.kernel.contract import _import_file
    from autotune.runtime import helion as tuned

    mod = _import_file(RMS)
    return tuned.kernel(
        mod.rms_norm.fn, kernel="helion_rms_norm", shape={"M": (0, 0), "N": (0, 1)}, db=db, **kw
    )


def test_the_dropin_runs_helions_default_when_nothing_is_tuned(tmp_path: Path) -> None:
    f = _dropin(f"sqlite:///{tmp_path / 'empty.db'}", record=False)
    x, w = torch.randn(32, 64, dtype=torch.float16), torch.randn(64, dtype=torch.float16)
    out = f(x, w)
    assert f.last_source == "default"
    assert f.last_config == f.helion_kernel.bind((x, w)).config_spec.default_config()
    ref = (x.float() * (1.0 / torch.sqrt((x.float() ** 2).mean(-1, keepdim=True) + 1e-5)) * w.float()).half()
    assert torch.allclose(out.float(), ref.float(), atol=1e-2, rtol=1e-2)
    assert torch.equal(f(x, w, eps=1e-5), out) and torch.equal(f(x, weight=w), out)  # by name too


def test_the_dropin_never_runs_helions_autotuner(tmp_path: Path) -> None:
    f = _dropin(f"sqlite:///{tmp_path / 'empty.db'}", record=False)
    x, w = torch.randn(32, 64, dtype=torch.float16), torch.randn(64, dtype=torch.float16)
    bound = f.helion_kernel.bind((x, w))
    # Helion's own entry to autotuning asks the database (here: nothing, so its default) and returns at once
    assert bound.autotune((x, w), force=True) == bound.config_spec.default_config()


def test_the_dropin_works_where_helion_disallows_autotuning(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HELION_DISALLOW_AUTOTUNING", "1")  # production's switch: refuses even autotuner_fn
    f = _dropin(f"sqlite:///{tmp_path / 'empty.db'}", record=False)
    x, w = torch.randn(32, 64, dtype=torch.float16), torch.randn(64, dtype=torch.float16)
    f(x, w)
    f(x, w)
    choice = f.choice(x, w)
    assert choice is not None and choice.source == "default"


def test_importing_the_runtime_dropin_imports_no_helion_or_torch() -> None:
    code = (
        "import sys; import autotune.runtime.helion, autotune; "
        "bad = [m for m in ('helion', 'torch', 'optuna', 'typer', 'alembic', 'triton') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_a_miss_is_tuned_by_a_service_and_the_running_dropin_picks_it_up(tmp_path: Path, monkeypatch) -> None:
    """search -> database -> drop-in -> serve, on a CPU: the drop-in's miss is recorded, a CPU `autotune
    serve` tunes that shape, and the same process (no restart) then runs the tuned config; `autotune
    export` writes it for a deployment that reads JSON."""
    from autotune.runtime import helion as tuned
    from autotune.runtime import requests_log
    from autotune.runtime.lookup import clear_cache
    from autotune.store import Store

    db = f"sqlite:///{tmp_path / 'helion.db'}"
    Store.open(db, create=True).close()
    monkeypatch.setattr(tuned, "RECHECK_S", 0.0)
    monkeypatch.setenv("AUTOTUNE_LOOKUP_RETRY", "0.5")
    clear_cache()
    f = _dropin(db, record=True)
    x, w = torch.randn(32, 64, dtype=torch.float16), torch.randn(64, dtype=torch.float16)
    f(x, w)
    assert f.last_source == "default"
    assert requests_log.flush() >= 1
    env = {"AUTOTUNE_TRIALS": "3", "AUTOTUNE_RETIME_TOP": "0", "AUTOTUNE_NUM_TESTS": "2"}
    env |= {"AUTOTUNE_SERVE_POLL": "0.5", "PYTHONPATH": str(ROOT)}
    log = (tmp_path / "serve.log").open("w")
    serve = subprocess.Popen(
        [sys.executable, "-m", "autotune", "serve", "--devices", "cpu", "--db", db, "--kernels", str(RMS)],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        deadline = time.monotonic() + 900
        while f.last_source != "exact":
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()[-3000:]
            assert serve.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            time.sleep(1.0)
            out = f(x, w)
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=120)
    ref = (x.float() * (1.0 / torch.sqrt((x.float() ** 2).mean(-1, keepdim=True) + 1e-5)) * w.float()).half()
    assert torch.allclose(out.float(), ref.float(), atol=1e-2, rtol=1e-2)
    best = _cli("best", "helion_rms_norm", "--db", db, "--shape", "M=32,N=64")
    assert best.returncode == 0, best.stderr
    exported = tmp_path / "best.json"
    proc = _cli("export", "--db", db, "--out", str(exported), "--kernel", "helion_rms_norm")
    assert proc.returncode == 0, proc.stderr
    clear_cache()
    g = _dropin(str(exported), record=False)
    g(x, w)
    assert g.last_source == "exact" and g.last_config == f.last_config


def test_the_auto_strategy_encodes_indexed_and_conditional_parameters(rms: Any) -> None:
    """No fallback to random: every parameter is a model column (block sizes on a log2 scale, strings one
    column per choice) and an inactive conditional is missing (NaN), not a made-up value."""
    import math

    from autotune.search.encoding import Encoder, ordinal

    space = Space.from_dict(rms.space)
    enc = Encoder(space.params, shape_params=("M", "N"))
    assert ordinal(space.param("block_sizes_0")).log
    flat_default = enc.row(rms.default_config, SMALL)
    persistent = {**rms.default_config, "pid_type": "persistent_blocked", "num_sm_multiplier": 4}
    persistent |= {n: space.param(n).choices[0] for n in space.names if n.startswith("range_")}
    assert space.check(persistent, {}) == []
    on = enc.row(persistent, SMALL)
    col = [i for i, (name, _) in enumerate(enc._cols) if name == "num_sm_multiplier"][0]
    assert math.isnan(flat_default[col]) and on[col] == 2.0  # log2(4)
    assert (
        len(flat_default) == enc.width
        and sum(not math.isnan(v) for v in flat_default) > len(space.names) // 2
    )
