"""Hostile nightly inputs (issue 21): job files that are alias bombs, 5,000 levels deep, not UTF-8, with
duplicate keys or a seed out of range, each one line and exit 2; requests recorded in production that
cannot be tuned, skipped with a reason instead of stopping the job; kernel and shape names carrying HTML
into report.md.

The job-file cases run ``autotune nightly --dry-run`` in a subprocess bounded in time and memory (as
test_faults_space does: a hang or a blow-up fails the test instead of the machine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.errors import AutotuneError, SettingsError
from autotune.jobs.nightly import load_job
from autotune.space.load import MAX_YAML_DEPTH, MAX_YAML_NODES
from tests.test_faults_space import TIMEOUT_S, _limit_memory, one_error_line

ROOT = Path(__file__).resolve().parent.parent
MATMUL = ROOT / "examples" / "matmul_cpu.py"
MAX_SEED = 2**32 - 1  # numpy's and Optuna's samplers take 0 .. 2**32 - 1


def nightly(job: Path, *args: str, db: Path | None = None) -> subprocess.CompletedProcess:
    """``autotune nightly JOB ARGS`` in a fresh interpreter, bounded in time and memory."""
    env = {**os.environ, "AUTOTUNE_DB": str(db or job.parent / "unused.db")}
    try:
        return subprocess.run(
            [sys.executable, "-m", "autotune", "nightly", str(job), *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=TIMEOUT_S,
            preexec_fn=_limit_memory,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"autotune nightly {job} still running after {TIMEOUT_S} s (a hang)")


def job_text(**fields: str) -> str:
    """A valid job file's text (YAML, one field a line), with ``fields`` replaced or added verbatim."""
    lines = {
        "name": "hostile",
        "devices": "cpu",
        "strategy": "random",
        "trials": "2",
        "kernels": f"[{{file: {json.dumps(str(MATMUL))}, shapes: ['M=64,N=64,K=64']}}]",
    }
    lines.update(fields)
    return "".join(f"{k}: {v}\n" for k, v in lines.items())


def write(tmp_path: Path, text: str | bytes, name: str = "job.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_a_valid_job_file_loads(tmp_path):
    """The baseline the hostile files below differ from: it loads (nothing below fails for another reason)."""
    job = load_job(write(tmp_path, job_text(seed=str(MAX_SEED))))
    assert job.name == "hostile" and job.seed == MAX_SEED and job.kernels[0].file == MATMUL


# ---------------------------------------------------------------- row 3: an alias bomb in a job file

#: anchors under an unknown field, each a list of ten aliases of the one before: 10**9 leaves once expanded
BOMB = ["anchors:", '  - &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]'] + [
    f"  - &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)
]


@pytest.mark.parametrize(
    "field, use",
    [
        ("name", "*a8"),
        ("deadline", "*a8"),
        ("verify", "{repeats: *a8}"),
        ("requested", "{min_count: *a8}"),
        ("kernels", f"[{{file: {json.dumps(str(MATMUL))}, shapes: *a8}}]"),
    ],
)
def test_job_file_alias_bomb_is_one_line(tmp_path, field, use):
    """A 1 KB job file took 58 s and 3.9 GB with --dry-run (in some fields it did not finish in 60 s)."""
    path = write(tmp_path, "\n".join(BOMB) + "\n" + job_text(**{field: use}))
    assert path.stat().st_size < 1500
    line = one_error_line(nightly(path, "--dry-run"), path)
    assert f"more than {MAX_YAML_NODES:,} nodes once aliases are expanded" in line, line


# ---------------------------------------------------------------- row 8: job files that were exit 3


@pytest.mark.parametrize("opener, closer", [("[", "]"), ("{a: ", "}")])
def test_5000_deep_job_file_is_one_line(tmp_path, opener, closer):
    """It was a RecursionError (exit 3)."""
    path = write(tmp_path, job_text(name=f"{opener * 5000}1{closer * 5000}"))
    line = one_error_line(nightly(path, "--dry-run"), path)
    assert f"nested more than {MAX_YAML_DEPTH} levels deep" in line and f"{path}:1:" in line, line


def test_job_file_not_utf8_is_one_line(tmp_path):
    path = write(tmp_path, job_text().encode() + b"report: caf\xe9\n")
    line = one_error_line(nightly(path, "--dry-run"), path)
    assert "not UTF-8 text" in line, line


@pytest.mark.parametrize(
    "text, where",
    [
        (job_text() + "trials: 5\n", 6),  # the later value won, silently
        (job_text(verify="{repeats: 5, repeats: 50}"), 6),
        (
            job_text(
                kernels=f"[{{file: {json.dumps(str(MATMUL))}, shapes: [default], shapes: [requested]}}]"
            ),
            5,
        ),
    ],
)
def test_duplicate_key_in_job_file_is_one_line(tmp_path, text, where):
    path = write(tmp_path, text)
    line = one_error_line(nightly(path, "--dry-run"), path)
    assert "duplicate key" in line and f"{path}:{where}:" in line, line
    with pytest.raises(SettingsError):
        load_job(path)


@pytest.mark.parametrize(
    "seed", [str(MAX_SEED + 1), str(2**64), "-1", str(10**400)], ids=["2**32", "2**64", "-1", "10**400"]
)
def test_seed_out_of_range_is_one_line(tmp_path, seed):
    """numpy's "Seed must be between 0 and 2**32 - 1" came out of the search as exit 3."""
    path = write(tmp_path, job_text(seed=seed))
    line = one_error_line(nightly(path, "--dry-run"), path)
    assert "seed: must be" in line and len(line) < 200, line
    with pytest.raises(AutotuneError, match="seed: must be"):
        load_job(path)


# ---------------------------------------------------------------- row 4: one poisoned request


def test_poisoned_requests_are_skipped_and_the_valid_one_is_tuned(sqlite_url, tmp_path):
    """Production recorded N=2**70 (no int64 holds it) and N=10**13 (its inputs cannot be allocated: 1.1 PiB
    of float32, more than any address space) beside a valid N=40. The job exited 2 on the first and tuned
    nothing; now both are skipped with the reason (dry-run plan, JSON, report) and N=40 is tuned."""
    from autotune.runtime import requests_log
    from autotune.runtime.lookup import best_config, clear_cache
    from autotune.store import Store

    Store(sqlite_url).schema.upgrade()
    clear_cache()
    try:
        for n in (2**70, 10**13, 40):
            best_config("matmul_cpu", db=sqlite_url, device="cpu", M=32, N=n, K=32, record=True)
        assert requests_log.flush() == 3
    finally:
        clear_cache()
    doc = {
        "name": "poisoned",
        "database": sqlite_url,
        "devices": "cpu",
        "kernels": [{"file": str(MATMUL), "shapes": ["requested"]}],
        "strategy": "random",
        "trials": 2,
        "seed": 0,
        "num_tests": 3,
        "verify": False,
        "report": str(tmp_path / "report"),
    }
    job = write(tmp_path, json.dumps(doc))
    huge, unbuildable, valid = (f"M=32,N={n},K=32" for n in (2**70, 10**13, 40))

    plan = subprocess.run(
        [sys.executable, "-m", "autotune", "nightly", str(job), "--dry-run"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert plan.returncode == 0, plan.stderr
    assert f"skip    requested {huge} (N={2**70} is too large (max 2**62))" in plan.stderr, plan.stderr
    assert f"tune    {valid}: 2 evaluations" in plan.stderr, plan.stderr

    out = tmp_path / "summary.json"
    proc = subprocess.run(
        [sys.executable, "-m", "autotune", "nightly", str(job), "--json", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(out.read_text())
    assert summary["errors"] == []
    by_shape = {e["shape"]: e for e in summary["shapes"]}
    assert by_shape[valid]["evaluations"] == 2 and by_shape[valid]["best_s"] > 0
    assert by_shape[unbuildable]["evaluations"] == 0
    assert by_shape[unbuildable]["skipped"].startswith("inputs cannot be built: RuntimeError"), by_shape
    skipped = summary["plans"][0]["skipped_requests"]
    assert [s.split(" (")[0] for s in skipped] == [huge, unbuildable], skipped
    md = (tmp_path / "report" / "report.md").read_text()
    assert f"- skipped request of matmul_cpu: {huge} (N={2**70} is too large" in md
    assert f"- skipped request of matmul_cpu: {unbuildable} (inputs cannot be built" in md
    assert "Requests skipped" in (tmp_path / "report" / "report.html").read_text()
    # and `autotune show --requests` says why, the reason found by building the inputs included
    shown = show_requests(sqlite_url)
    reasons = last_column(shown)
    assert squash(f"N={2**70} is too large") in reasons, shown
    assert squash("inputs cannot be built: RuntimeError") in reasons, shown
    row = next(line for line in shown.splitlines() if f"N={40}," in line)
    assert row.rstrip(" │").endswith("-"), row  # tuned: no reason


def show_requests(db: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "autotune", "show", "--requests", "--db", db],
        capture_output=True, text=True, cwd=ROOT, timeout=120, env={**os.environ, "COLUMNS": "400"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def last_column(table: str) -> str:
    """The last column's cells read down the table, squashed: a long reason wraps over lines, how many
    depends on the other columns' widths (the machine's CPU name), and a whole-table squash splits it."""
    return squash("".join(line.split("│")[-2] for line in table.splitlines() if line.count("│") > 2))


def squash(text: str) -> str:
    """Table text without spaces and rules: a cell rich wrapped over lines reads as one string."""
    return "".join(text.replace("│", " ").split())


def test_show_requests_gives_the_skip_reason_before_any_nightly_run(sqlite_url):
    """Reasons known without a run: a dimension too large for any tensor, and names that are not the
    kernel's shape parameters (as its tuned keys name them)."""
    from autotune.runtime import requests_log
    from autotune.runtime.lookup import best_config, clear_cache
    from autotune.store import Store
    from tests.test_store import ensure

    store = Store(sqlite_url)
    store.schema.upgrade()
    ensure(store, kernel="matmul_cpu", shape={"M": 8, "N": 8, "K": 8})
    clear_cache()
    try:
        best_config("matmul_cpu", db=sqlite_url, device="cpu", M=32, N=2**70, K=32, record=True)
        best_config("matmul_cpu", db=sqlite_url, device="cpu", M=32, N=40, X=32, record=True)
        best_config("matmul_cpu", db=sqlite_url, device="cpu", M=32, N=40, K=32, record=True)
        assert requests_log.flush() == 3
    finally:
        clear_cache()
    shown = last_column(show_requests(sqlite_url))
    assert squash(f"N={2**70} is too large (max 2**62)") in shown, shown
    assert squash("not the kernel's shape parameters M,N,K") in shown, shown
    store.close()


# ---------------------------------------------------------------- row 12: HTML in report.md

XSS_KERNEL = "<script>alert(1)</script>"
XSS_DIM = "<img src=x onerror=alert(2)>"
XSS_GPU = "<b>GPU</b> | [x](javascript:alert(3))"


def test_report_markdown_carries_no_html_from_names(sqlite_url, tmp_path):
    """A kernel, a shape's dimension, a GPU, a job and a requested shape named with HTML went into report.md
    raw (headings and tables): now every one is text (entities, escaped Markdown), tables keep their columns;
    the HTML report already escaped them and still does."""
    from autotune.engine import KernelMeta, SimulatedBackend, WorkerInfo
    from autotune.jobs.nightly import Job, KernelJob, run_job
    from autotune.jobs.report import write_report
    from autotune.runtime import requests_log
    from autotune.runtime.lookup import best_config, clear_cache
    from tests.test_nightly_sim import ENV, SPACE, NoisyKernel

    meta = KernelMeta(
        name=XSS_KERNEL,
        path="sim",
        source_hash="x" * 64,
        space=SPACE,
        space_source="<inline>",
        default_config={"A": 1, "B": 1},
        default_shapes=({XSS_DIM: 8},),
        shape_params=(XSS_DIM,),
        dtypes={},
    )
    info = WorkerInfo(meta, {"cc": 0}, {**ENV, "gpu_name": XSS_GPU}, "sim:0", 1)
    noisy = NoisyKernel()

    def kernel(config, shape):  # the simulated kernel, on the one dimension whatever its name
        return noisy(config, {"N": shape[XSS_DIM]})

    job = Job(
        path=tmp_path / "job.yaml",
        name="<script>job</script>",
        kernels=(KernelJob(tmp_path / "sim.py", ("default", "requested")),),
        database=sqlite_url,
        devices="sim:0",
        strategy="random",
        evaluations=3,
        seed=0,
        verify=None,
    )
    result = run_job(job, backend_factory=lambda path: SimulatedBackend(info, kernel))
    assert result.errors == [] and result.shapes[0]["evaluations"] == 3
    clear_cache()
    try:
        best_config(XSS_KERNEL, db=sqlite_url, record=True, **{XSS_DIM: 16})
        assert requests_log.flush() == 1
    finally:
        clear_cache()
    files = {
        p.name: p.read_text() for p in write_report(sqlite_url, tmp_path / "report", run_id=result.run_id)
    }
    md = files["report.md"]
    for raw in ("<script", "<img", "<b>", "[x](javascript:"):
        assert raw not in md, md
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md and "&lt;img src=x onerror=alert(2)&gt;=8" in md
    assert "&lt;img src=x onerror=alert(2)&gt;=16" in md  # the requested shape
    for line in md.splitlines():
        if line.startswith("| &lt;script&gt;"):  # a row about the kernel: as many cells as its header
            assert line.replace("\\|", "").count("|") in (4, 5, 8, 9, 10), line
    html = files["report.html"]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<img src=x" not in html
