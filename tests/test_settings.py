"""Settings (autotune/settings.py) and devices (autotune/devices.py): one place for every variable."""

from __future__ import annotations

import ast
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autotune import settings
from autotune.devices import ALL, Device, parse_devices
from autotune.errors import SettingsError
from autotune.settings import ENV_VARS, SearchSettings, check_environment, flush_bytes

ROOT = Path(__file__).resolve().parents[1]


def test_every_variable_the_code_reads_is_declared_and_documented():
    read = set()
    for f in (ROOT / "autotune").rglob("*.py"):
        read |= set(re.findall(r"AUTOTUNE_[A-Z_]+[A-Z]", f.read_text()))
    assert read == set(ENV_VARS), read ^ set(ENV_VARS)
    # docs/settings.md's table is ENV_VARS: the same variables, in the same order, with the same meanings
    doc = (ROOT / "docs" / "settings.md").read_text()
    table = dict(re.findall(r"^\| `(AUTOTUNE_[A-Z_]+)` \| (.*?) \|$", doc, re.M))
    assert list(table.items()) == list(ENV_VARS.items())


@pytest.mark.parametrize(
    "env,value,message",
    [
        ("AUTOTUNE_TRIALS", "0", ">= 1"),
        ("AUTOTUNE_RUN_TIMEOUT", "nan", "finite"),
        ("AUTOTUNE_RUN_TIMEOUT", "0", "> 0"),
        ("AUTOTUNE_TIMEOUT", "inf", "finite"),
        ("AUTOTUNE_LEASE", "-1", "> 0"),
        ("AUTOTUNE_COMPILE_WORKERS", "-2", ">= 0"),
        ("AUTOTUNE_DEVICES", "gpu7", "unknown device"),
    ],
)
def test_bad_values_are_one_error(monkeypatch, env, value, message):
    monkeypatch.setenv(env, value)
    with pytest.raises(SettingsError, match=re.escape(message)):
        SearchSettings()


def test_strategy_names_are_checked_where_the_registry_lives(monkeypatch):
    from autotune.cli.common import check_strategy

    monkeypatch.setenv("AUTOTUNE_STRATEGY", "Annealing")
    assert SearchSettings().strategy == "annealing"  # settings only normalize: they know no registry
    with pytest.raises(SettingsError, match=re.escape("unknown strategy 'annealing': choose one of")):
        check_strategy(SearchSettings().strategy)
    assert check_strategy("grid") == "grid"


def test_flags_beat_env(monkeypatch):
    monkeypatch.setenv("AUTOTUNE_TRIALS", "7")
    assert SearchSettings().trials == 7
    assert SearchSettings.from_options(trials=3, strategy=None).trials == 3
    assert SearchSettings().compile_workers is None  # automatic: decided by the tuner per device


def test_flush_bytes(monkeypatch):
    assert flush_bytes() is None
    monkeypatch.setenv("AUTOTUNE_FLUSH_BYTES", "1e9")
    assert flush_bytes() == 10**9
    for bad in ("lots", "nan", "0", "1e30"):
        monkeypatch.setenv("AUTOTUNE_FLUSH_BYTES", bad)
        with pytest.raises(SettingsError, match="AUTOTUNE_FLUSH_BYTES"):
            flush_bytes()


def test_devices():
    assert parse_devices("") == ()
    assert parse_devices("all") == ALL
    assert parse_devices("cuda:1,cuda:0") == (Device("cuda", 1), Device("cuda", 0))
    assert str(Device.parse("CUDA:3")) == "cuda:3" and Device.parse("cpu").is_cuda is False
    for bad, msg in [
        ("cuda:0,cuda:0", "twice"),
        ("cpu,cuda:0", "mixes"),
        ("cuda,cuda:1", "give indices"),
        ("tpu", "unknown device"),
        ("cuda:99999", "unknown device"),
    ]:
        with pytest.raises(SettingsError, match=msg):
            parse_devices(bad)


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("AUTOTUNE_")}


def test_settings_import_nothing_heavy_nor_the_search_registry():
    code = (
        "import sys\n"
        "from autotune import settings\n"
        "settings.check_environment(); settings.lookup_timeout_s(); settings.record(); settings.home()\n"
        "heavy = ('autotune.search', 'optuna', 'typer', 'alembic', 'torch', 'sqlalchemy')\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=_clean_env(), capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.parametrize(
    "name,read",
    [("AUTOTUNE_LOOKUP_TIMEOUT", "lookup_timeout_s"), ("AUTOTUNE_LOOKUP_RETRY", "lookup_retry_s")],
)
@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf"])
def test_lookup_settings_warn_once_and_default(monkeypatch, caplog, name, read, value):
    monkeypatch.setattr(settings, "_warned", set())
    monkeypatch.setenv(name, value)
    default = {"lookup_timeout_s": settings.LOOKUP_TIMEOUT_S, "lookup_retry_s": settings.LOOKUP_RETRY_S}[read]
    with caplog.at_level(logging.WARNING, logger="autotune.settings"):
        assert getattr(settings, read)() == default
        assert getattr(settings, read)() == default
    said = [r.getMessage() for r in caplog.records if name in r.getMessage()]
    assert len(said) == 1 and "using the default" in said[0], said
    monkeypatch.setenv(name, "0.5")
    assert getattr(settings, read)() == 0.5
    with pytest.raises(SettingsError, match=name):  # the strict reading of the same value (CLI start-up)
        monkeypatch.setenv(name, value)
        settings.env_float(name, default)


def test_best_config_with_bad_lookup_settings_answers_and_warns(tmp_path):
    # end to end, in a fresh interpreter: the lookup neither raises nor loads anything heavy
    db = tmp_path / "l.db"
    code = (
        "import sys\n"
        "from autotune.store import Store\n"
        "from autotune.env import current_device_name\n"
        "from autotune.trial import TrialResult, TrialStatus\n"
        "env = dict(device_kind='cpu', gpu_name=current_device_name('cpu'), cc='cpu', sm_count=2,\n"
        "           driver='none', cuda='none', torch='2.8.0', triton='3.6.0')\n"
        "with Store(sys.argv[1]) as s:\n"
        "    s.schema.upgrade()\n"
        "    key = s.keys.ensure('gemm', 'a' * 64, 's' * 64, {}, {'M': 64}, 'M=64', {'a': 'bf16'}, env)\n"
        "    s.trials.record(key.id, TrialResult(TrialStatus.OK, {'BLOCK': 64}, time_s=1e-5))\n"
        "    s.trials.refresh_best(key.id)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(db)], cwd=ROOT, env=_clean_env(), check=True, timeout=120)
    lookup = (
        "import sys, time\n"
        "from autotune.runtime.lookup import best_config\n"
        "# the bad timeout falls back to the default (1 s): on a loaded machine the first read may take longer,\n"
        "# and the rows are used once they arrive, so wait for them rather than assume the 1 s holds\n"
        "deadline = time.monotonic() + 60\n"
        "while best_config('gemm', db=sys.argv[1], device='cpu', M=64) != {'BLOCK': 64}:\n"
        "    assert time.monotonic() < deadline, 'the stored rows never arrived'\n"
        "    time.sleep(0.05)\n"
        "for _ in range(3):\n"
        "    assert best_config('gemm', db=sys.argv[1], device='cpu', M=64) == {'BLOCK': 64}\n"
        "    # a failed database is retried after AUTOTUNE_LOOKUP_RETRY: read on the second call\n"
        "    assert best_config('gemm', db=sys.argv[1] + '.missing', device='cpu', default=1, M=64) == 1\n"
        "heavy = ('optuna', 'typer', 'alembic', 'torch')\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    env = {**_clean_env(), "AUTOTUNE_LOOKUP_TIMEOUT": "soon", "AUTOTUNE_LOOKUP_RETRY": "-5"}
    out = subprocess.run(
        [sys.executable, "-c", lookup, str(db)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr
    for name in ("AUTOTUNE_LOOKUP_TIMEOUT='soon'", "AUTOTUNE_LOOKUP_RETRY must be >= 0"):
        assert out.stderr.count(name) == 1, out.stderr


def _env_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) of every read of the process environment in a module: os.environ[...], .get(...),
    os.getenv(...); what is the key when it is a literal, else "<computed>"."""
    reads = []
    for node in ast.walk(tree):
        target = key = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            target, key = node.value, node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            if node.func.attr == "get":
                target, key = node.func.value, node.args[0]
            elif node.func.attr == "getenv":
                target, key = node.func, node.args[0]
        if target is None or "environ" not in ast.unparse(target) and "getenv" not in ast.unparse(target):
            continue
        literal = isinstance(key, ast.Constant) and isinstance(key.value, str)
        reads.append((node.lineno, key.value if literal else "<computed>"))
    return reads


def test_every_autotune_variable_is_read_in_settings_only():
    offenders = []
    for f in sorted((ROOT / "autotune").rglob("*.py")):
        if f == ROOT / "autotune" / "settings.py":
            continue
        for line, key in _env_reads(ast.parse(f.read_text())):
            if key.startswith("AUTOTUNE_") or key == "<computed>":
                offenders.append(f"{f.relative_to(ROOT)}:{line} reads {key}")
    assert not offenders, "read these through autotune.settings: " + "; ".join(offenders)
    # the check sees the kinds of reads it looks for
    sample = "import os\nos.environ.get('AUTOTUNE_X')\nos.environ['AUTOTUNE_Y']\nos.getenv(name)\n"
    assert [k for _, k in _env_reads(ast.parse(sample))] == ["AUTOTUNE_X", "AUTOTUNE_Y", "<computed>"]


@pytest.mark.parametrize("seed", [-1, 2**32, 2**70])
def test_a_seed_outside_the_samplers_range_is_one_line(seed, monkeypatch):
    """issue 21 row 8: a seed Optuna cannot take was an internal error (exit 3) deep in the sampler."""
    with pytest.raises(SettingsError, match="--seed must be between 0 and 2"):
        SearchSettings(seed=seed)
    monkeypatch.setenv("AUTOTUNE_SEED", str(seed))
    with pytest.raises(SettingsError, match="--seed"):
        check_environment()
    assert SearchSettings(seed=2**32 - 1).seed == 2**32 - 1
