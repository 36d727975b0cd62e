"""Settings (autotune/settings.py) and devices (autotune/devices.py): one place for every variable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autotune.devices import ALL, Device, parse_devices
from autotune.errors import SettingsError
from autotune.settings import ENV_VARS, SearchSettings, flush_bytes

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
        ("AUTOTUNE_STRATEGY", "annealing", "unknown strategy"),
        ("AUTOTUNE_DEVICES", "gpu7", "unknown device"),
    ],
)
def test_bad_values_are_one_error(monkeypatch, env, value, message):
    monkeypatch.setenv(env, value)
    with pytest.raises(SettingsError, match=re.escape(message)):
        SearchSettings()


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
