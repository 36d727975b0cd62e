"""autotune/triton_space.py: a triton.Config list as a search space and back, and `autotune space --from-triton`."""

from __future__ import annotations

import itertools
import random
import subprocess
from pathlib import Path

import pytest

# ImportError, not only a missing module: a broken install skips too
triton = pytest.importorskip("triton", exc_type=ImportError)

from autotune.errors import SpaceError  # noqa: E402
from autotune.space import Space  # noqa: E402
from autotune.space.expr import MAX_EXPR_CHARS  # noqa: E402
from autotune.space.triton import (  # noqa: E402
    config_dict,
    configs_from_space,
    dump_yaml,
    space_from_configs,
    to_triton_config,
)

ROOT = Path(__file__).resolve().parents[1]
SOFTMAX = ROOT / "examples" / "softmax.py"
VALUES = {
    "BLOCK_M": [16, 32, 64, 128, 256],
    "BLOCK_N": [32, 64, 128, 256],
    "BLOCK_K": [32, 64, 128],
    "GROUP_M": [1, 8],
}


def as_set(configs) -> set[tuple]:
    return {tuple(sorted(config_dict(c).items())) for c in configs}


def product_configs(values=VALUES, warps=(4, 8), stages=(2, 3, 4)) -> list:
    return [
        triton.Config(dict(zip(values, combo, strict=True)), num_warps=w, num_stages=s)
        for combo in itertools.product(*values.values())
        for w in warps
        for s in stages
    ]


@pytest.mark.parametrize("n", [1, 2, 7, 60, 212, 700])
def test_listed_subset_round_trips_exactly(n: int) -> None:
    everything = product_configs()
    listed = random.Random(n).sample(everything, n)
    defn = space_from_configs(listed, "gemm")
    space = Space.from_dict(defn)
    back = configs_from_space(space)
    assert as_set(back) == as_set(listed)
    # every combination outside the list is invalid, every listed one valid
    for c in everything:
        assert space.is_valid(config_dict(c)) == (tuple(sorted(config_dict(c).items())) in as_set(listed))
    for con in defn.get("constraints", []):
        assert len(con["expr"]) <= MAX_EXPR_CHARS and len(con.get("when", "")) <= MAX_EXPR_CHARS


def test_a_long_list_splits_into_several_constraints() -> None:
    values = {**VALUES, "SPLIT_K": [1, 2, 4, 8], "EVEN": [True, False]}
    everything = product_configs(values, warps=(2, 4, 8), stages=(1, 2, 3, 4))
    listed = random.Random(0).sample(everything, 3000)
    defn = space_from_configs(listed, "big")
    assert len(defn["constraints"]) > 1
    assert as_set(configs_from_space(defn)) == as_set(listed)


def test_full_product_has_no_constraints_and_product_flag_widens() -> None:
    full = product_configs()
    defn = space_from_configs(full, "full")
    assert "constraints" not in defn
    assert defn["params"] == {**VALUES, "num_warps": [4, 8], "num_stages": [2, 3, 4]}
    listed = full[::7]
    widened = space_from_configs(listed, "w", product=True)
    assert "constraints" not in widened
    assert Space.from_dict(widened).count() == len(full)
    assert Space.from_dict(space_from_configs(listed, "w")).count() == len(listed)


def test_values_are_sorted_choices_and_the_hash_ignores_list_order() -> None:
    listed = product_configs()[::5]
    shuffled = list(listed)
    random.Random(1).shuffle(shuffled)
    a, b = (
        Space.from_dict(space_from_configs(listed, "x")),
        Space.from_dict(space_from_configs(shuffled, "x")),
    )
    assert a.hash() == b.hash()
    assert list(a.param("BLOCK_M").choices) == sorted(a.param("BLOCK_M").choices)


def test_strings_bools_floats_and_optional_fields_round_trip() -> None:
    listed = [
        triton.Config(
            {"ORDER": "mn", "EVEN": True, "SCALE": 0.5}, num_warps=4, num_stages=2, num_ctas=2, maxnreg=128
        ),
        triton.Config(
            {"ORDER": "nm", "EVEN": False, "SCALE": 1.0}, num_warps=8, num_stages=3, num_ctas=1, maxnreg=255
        ),
    ]
    defn = space_from_configs(listed, "odd")
    assert list(defn["params"]) == [
        "ORDER",
        "EVEN",
        "SCALE",
        "num_warps",
        "num_stages",
        "num_ctas",
        "maxnreg",
    ]
    back = configs_from_space(Space.from_dict(defn))
    assert as_set(back) == as_set(listed)
    assert {(c.num_ctas, c.maxnreg) for c in back} == {(2, 128), (1, 255)}
    # YAML text loads back to the same space
    import yaml

    assert Space.from_dict(yaml.safe_load(dump_yaml(defn))).hash() == Space.from_dict(defn).hash()


def test_default_fields_are_not_params() -> None:
    defn = space_from_configs([triton.Config({"B": 1}), triton.Config({"B": 2})], "d")
    assert list(defn["params"]) == ["B", "num_warps", "num_stages"]


def test_config_dict_and_back() -> None:
    def hook(nargs):
        return None

    cfg = triton.Config({"BLOCK": 64}, num_warps=2, num_stages=1, pre_hook=hook)
    d = config_dict(cfg)
    assert d == {"BLOCK": 64, "num_warps": 2, "num_stages": 1}
    back = to_triton_config(d, like=cfg)
    assert back.all_kwargs() == cfg.all_kwargs() and back.pre_hook is hook
    assert to_triton_config({"BLOCK": 64}).all_kwargs() == {
        "BLOCK": 64,
        "num_warps": 4,
        "num_ctas": 1,
        "num_stages": 3,
    }


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ([], "empty"),
        ([triton.Config({"A": 1}), triton.Config({"B": 1})], "must set the same kwargs"),
        ([triton.Config({"A": 1}, maxnreg=128), triton.Config({"A": 2})], "maxnreg"),
        ([triton.Config({"A": [1, 2]})], "not an int, float, str or bool"),
        ([triton.Config({"A": float("nan")})], "not an int, float, str or bool"),
        ([triton.Config({"num_warps": 4})], "may not be named num_warps"),
        (["BLOCK=64"], "not a triton.Config"),
    ],
)
def test_bad_lists_are_one_clear_error(configs, message: str) -> None:
    with pytest.raises(SpaceError, match=message):
        space_from_configs(configs, "bad")


def cli(*args: str) -> subprocess.CompletedProcess:
    """`autotune ARGS` in this process (CliRunner): the kernel file is imported here, as the tests above
    do, instead of a new interpreter importing torch and triton for each case."""
    from typer.testing import CliRunner

    from autotune.cli import app

    result = CliRunner().invoke(app, list(args))
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


@pytest.mark.parametrize("name", ["softmax_dropin", "softmax_autotuned", "KERNEL", "CONFIGS"])
def test_cli_from_triton_writes_the_kernels_space(tmp_path: Path, name: str) -> None:
    out = tmp_path / "softmax.yaml"
    proc = cli("space", "--from-triton", f"{SOFTMAX}:{name}", "--out", str(out), "--facts", "cpu")
    assert proc.returncode == 0, proc.stderr
    assert "69 valid on cpu" in proc.stdout
    space = Space.from_yaml(out)
    # named after the stored kernel name where the object has one, else after the name in the file
    assert space.name == ("softmax" if name in ("softmax_dropin", "KERNEL") else name)
    # the same space as the kernel file's inline one, derived from the same list (same hash: same key)
    from autotune.kernel.contract import load_kernel_file

    loaded = load_kernel_file(SOFTMAX)
    assert {p.name: p.choices for p in space.params} == {
        p.name: p.choices for p in Space.from_dict(loaded.space_def).params
    }
    assert as_set(configs_from_space(space)) == as_set(loaded.kernel.configs)
    if space.name == "softmax":  # the same definition: the same space hash, so the same tuning keys
        assert space.hash() == Space.from_dict(loaded.space_def).hash()


def test_cli_from_triton_prints_yaml_without_out() -> None:
    proc = cli("space", "--from-triton", f"{SOFTMAX}:softmax_dropin", "--product")
    assert proc.returncode == 0, proc.stderr
    import yaml

    defn = yaml.safe_load(proc.stdout)
    assert Space.from_dict(defn).count() == 6 * 5 * 3 and "constraints" not in defn


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (f"{SOFTMAX}", "expected FILE.py:NAME"),
        (f"{SOFTMAX}:nothing_here", "defines no 'nothing_here'"),
        (f"{SOFTMAX}:softmax_kernel", "not a triton.Config list"),
        ("missing.py:KERNEL", "no such file"),
    ],
)
def test_cli_from_triton_bad_input_is_one_line_exit_2(tmp_path: Path, spec: str, message: str) -> None:
    out = tmp_path / "never.yaml"
    proc = cli("space", "--from-triton", spec, "--out", str(out))
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not out.exists()


def test_cli_space_needs_a_file_or_from_triton() -> None:
    proc = cli("space")
    assert proc.returncode == 2 and "--from-triton" in proc.stderr


def test_a_stored_config_finds_its_listed_config_whatever_fields_it_spells_out():
    """A space that lists num_ctas stores num_ctas: 1 for configs that left it at Triton's default: the
    listed Config (and its pre_hook) is still found for it."""
    from autotune.space.triton import config_key, listed_configs

    def hook(args):
        return None

    configs = [triton.Config({"B": 64}, num_ctas=2), triton.Config({"B": 128}, pre_hook=hook)]
    space = Space.from_dict(space_from_configs(configs, "hooks"))
    stored = next(c for c in space.enumerate({}) if c["B"] == 128)
    assert stored["num_ctas"] == 1
    found = listed_configs(configs).get(config_key(stored))
    assert found is configs[1] and found.pre_hook is hook
