"""The result cache and the worker pool: same answers as a plain run, always."""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import torchlint.run.pool as pool
from torchlint.config.load import load_config
from torchlint.results import FileResult, FixRecord, Job, Question, TextEdit, Violation
from torchlint.run.cache import DIRNAME, FORMAT, TAG, Cache, Summaries, code_fingerprint
from torchlint.run.files import Mode, run

from .conftest import LOADER, ROOT, plan_of, run_cli


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(LOADER)
    (tmp_path / "clean.py").write_text("import torch\nx = torch.zeros(3)\n")
    (tmp_path / "broken.py").write_text(LOADER + "def f(:\n")
    return tmp_path


def _entries(root: Path) -> list[Path]:
    """The stored results (the project's summaries are beside them, in project-v*/)."""
    return sorted(p for p in (root / DIRNAME / f"v{FORMAT}").rglob("*") if p.is_file())


def _same(a, b) -> None:
    assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)


@pytest.mark.parametrize("fmt", ["full", "json"])
def test_warm_run_answers_as_a_cold_one(project, fmt):
    args = ("check", "--output-format", fmt, "--show-fixes", ".")
    plain = run_cli(*args, "--no-cache", cwd=project)
    assert not (project / DIRNAME).exists()
    cold = run_cli(*args, cwd=project)
    assert (project / DIRNAME / TAG).is_file()
    assert (project / DIRNAME / ".gitignore").read_text().splitlines()[-1] == "*"
    assert len(_entries(project)) == 3
    warm = run_cli(*args, cwd=project)
    _same(plain, cold)
    _same(cold, warm)


def test_entries_hold_no_source_and_no_code(project):
    run_cli("check", ".", cwd=project)
    for entry in _entries(project):
        data = json.loads(entry.read_text())  # plain JSON: loading it runs nothing
        assert data["result"]["text"] is None


def test_entries_of_other_formats_are_removed(project):
    """A torchlint of another cache format (an upgrade) leaves its entries behind: the
    first entry of this format removes them, and nothing else of the directory."""
    run_cli("check", ".", cwd=project)
    cache = project / DIRNAME
    shutil.rmtree(cache / f"v{FORMAT}")
    shutil.rmtree(cache / f"project-v{FORMAT}")
    for old in ("v1", f"project-v{FORMAT + 1}", "vendor", "v2x"):
        (cache / old / "ab").mkdir(parents=True)
    run_cli("check", ".", cwd=project)
    kept = {p.name for p in cache.iterdir()}
    assert {f"v{FORMAT}", f"project-v{FORMAT}", "vendor", "v2x", TAG} <= kept
    assert not kept & {"v1", f"project-v{FORMAT + 1}"}


def test_edit_selection_and_options_are_never_stale(project):
    run_cli("check", ".", cwd=project)
    (project / "clean.py").write_text(LOADER)  # same size class, new content
    result = run_cli("check", "--output-format", "concise", ".", cwd=project)
    assert "clean.py:3:10: TL201" in result.stdout
    ignored = run_cli("check", "--output-format", "concise", "--ignore", "TL201", ".", cwd=project)
    assert "TL201" not in ignored.stdout
    again = run_cli("check", "--output-format", "concise", ".", cwd=project)
    assert "clean.py:3:10: TL201" in again.stdout


def test_corrupt_or_foreign_entries_are_ignored(project):
    first = run_cli("check", ".", cwd=project)
    for i, entry in enumerate(_entries(project)):
        entry.write_bytes([b"", b"{not json", b'{"content": 1}'][i % 3])
    _same(first, run_cli("check", ".", cwd=project))
    _same(first, run_cli("check", ".", cwd=project))  # and they were rewritten


def test_unwritable_cache_location_is_not_an_error(project):
    blocker = project / "not-a-dir"
    blocker.write_text("")
    env = {"TORCHLINT_CACHE_DIR": str(blocker / "cache")}
    result = run_cli("check", "--output-format", "concise", ".", cwd=project, env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "train.py:3:10: TL201" in result.stdout


def test_fix_then_check_uses_fresh_results(project):
    assert run_cli("check", ".", cwd=project).returncode == 2  # warms the cache
    fixed = run_cli("fix", "--unsafe-fixes", "train.py", "clean.py", cwd=project)
    assert fixed.returncode == 0, fixed.stderr
    after = run_cli("check", "train.py", "clean.py", cwd=project)
    assert after.returncode == 0 and "All checks passed!" in after.stdout
    again = run_cli("fix", "--unsafe-fixes", "train.py", "clean.py", cwd=project)
    assert again.returncode == 0 and "All checks passed!" in again.stdout


def test_clean_removes_only_a_torchlint_cache(project):
    run_cli("check", ".", cwd=project)
    result = run_cli("clean", cwd=project)
    assert result.returncode == 0 and "Removed" in result.stdout
    assert not (project / DIRNAME).exists()
    assert run_cli("clean", cwd=project).stdout == ""  # nothing to remove: quiet
    precious = project / "precious"
    precious.mkdir()
    (precious / "data").write_text("keep")
    run_cli("clean", cwd=project, env={"TORCHLINT_CACHE_DIR": str(precious)})
    assert (precious / "data").read_text() == "keep"


@pytest.mark.slow
def test_concurrent_runs_share_the_cache_safely(project):
    for i in range(30):
        (project / f"m{i}.py").write_text(LOADER * (i % 3 + 1))
    cmd = [sys.executable, "-m", "torchlint", "check", "--output-format", "json", "."]
    env = {"NO_COLOR": "1", "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    procs = [
        subprocess.Popen(cmd, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    expected = run_cli("check", "--output-format", "json", "--no-cache", ".", cwd=project)
    for out, err in outputs:
        assert b"Traceback" not in err
        assert json.loads(out) == json.loads(expected.stdout)
    leftovers = [p for p in (project / DIRNAME).rglob(".tmp-*")]
    assert leftovers == []


def test_rule_source_is_part_of_the_key(tmp_path, monkeypatch):
    import torchlint.rules

    (tmp_path / "tl999_x.py").write_text("A = 1\n")
    monkeypatch.setattr(torchlint.rules, "__path__", [str(tmp_path)])
    before = code_fingerprint()
    (tmp_path / "tl999_x.py").write_text("A = 2\n")
    assert code_fingerprint() != before


def test_engine_source_is_part_of_the_key(tmp_path, monkeypatch):
    """Every module of the engine counts, those of its subpackages too."""
    import torchlint

    (tmp_path / "semantic").mkdir()
    (tmp_path / "semantic" / "loops.py").write_text("A = 1\n")
    monkeypatch.setattr(torchlint, "__file__", str(tmp_path / "__init__.py"))
    before = code_fingerprint()
    (tmp_path / "semantic" / "loops.py").write_text("A = 2\n")
    assert code_fingerprint() != before


def test_put_and_get_round_trip_every_field(tmp_path):
    job = Job(codes=("TL201",), settings=load_config(None).settings(), with_edits=True)
    cache = Cache(tmp_path / "c", job)
    raw = LOADER.encode()
    v = Violation(
        "TL201",
        "n",
        "m",
        3,
        10,
        3,
        24,
        FixRecord("t", "unsafe", (TextEdit((3, 1), (4, 1), "x\n"),)),
    )
    result = FileResult("a.py", [v], text=LOADER, fixed=["TL201"], diff="d", cells=["c"])
    cache.put(tmp_path / "a.py", "a.py", ("TL201",), raw, result)
    assert cache.get(tmp_path / "a.py", "a.py", ("TL201",), raw) == result
    assert cache.get(tmp_path / "a.py", "a.py", ("TL201",), raw + b"\n") is None
    assert cache.get(tmp_path / "a.py", "a.py", ("TL202",), raw) is None


def test_answers_are_json_only_in_the_cache(tmp_path):
    """Answers are keyed by `Question` in a run and stored as JSON lists: they come back
    equal, from a result (no summary) and from the summaries' store; an entry whose
    answers are not such lists (string keys, as before) is a miss."""
    answers = {
        Question("param", "Trainer.fit", "device"): {"device": "cuda"},
        Question("export", "pkg.models.Net"): None,
        Question("any stepped"): True,
    }
    job = Job(codes=("TL201",), settings=load_config(None).settings())
    cache, raw = Cache(tmp_path / "c", job), LOADER.encode()
    result = FileResult("a.py", text=LOADER, answers=answers, checked=True)
    cache.put(tmp_path / "a.py", "a.py", ("TL201",), raw, result)
    assert cache.get(tmp_path / "a.py", "a.py", ("TL201",), raw) == result
    store = Summaries(tmp_path / "c", job.settings.knowledge)
    store.put(tmp_path, "a.py", "ab" * 32, {"exports": {}}, answers)
    assert store.get(tmp_path, "a.py", "ab" * 32) == ({"exports": {}}, answers)
    entry = store._entry(tmp_path, "a.py", "ab" * 32)
    entry.write_text(json.dumps({"summary": {}, "answers": {"uses #0": None}}))
    assert store.get(tmp_path, "a.py", "ab" * 32) is None


# -- worker processes ------------------------------------------------------------------


def _many(tmp_path: Path, n: int = 40) -> list[Path]:
    files = []
    for i in range(n):
        path = tmp_path / f"f{i:02}.py"
        body = LOADER if i % 3 else "import torch\nx = 1\n"
        if i % 7 == 0:
            body += "def f(:\n"  # an error in the middle keeps its place
        path.write_text(body + f"# {i}\n" * (i % 5))
        files.append(path)
    return files


def test_pool_gives_the_same_results_in_the_same_order(tmp_path, monkeypatch):
    files = _many(tmp_path)
    config = load_config(None)
    plan = plan_of(config)
    monkeypatch.setenv(pool.WORKERS_ENV, "1")
    seen_alone: list[str] = []
    alone = run(plan, files, on_result=lambda r: seen_alone.append(r.path)).results
    monkeypatch.setenv(pool.WORKERS_ENV, "3")
    monkeypatch.setattr(pool, "MIN_POOL_BYTES", 0)
    assert pool._pool_size([pool.Task(i, f, ()) for i, f in enumerate(files)])[0] == 3
    seen_pool: list[str] = []
    pooled = run(plan, files, on_result=lambda r: seen_pool.append(r.path)).results
    assert pooled == alone
    assert seen_pool == seen_alone == [r.path for r in alone]
    assert all(r.path.endswith(f"f{i:02}.py") for i, r in enumerate(alone))


@pytest.mark.skipif(pool.START_METHOD != "fork", reason="processes are forked on Linux only")
def test_a_worker_process_that_dies_or_cannot_start_costs_no_result(tmp_path, monkeypatch):
    files = _many(tmp_path, 6)
    config = load_config(None)
    plan = plan_of(config)
    job = Mode.CHECK.job(plan)
    monkeypatch.setenv(pool.WORKERS_ENV, "1")
    alone = run(plan, files).results
    monkeypatch.setenv(pool.WORKERS_ENV, "2")
    monkeypatch.setattr(pool, "MIN_POOL_BYTES", 0)
    parent, real, died = os.getpid(), pool.analyse, tmp_path / "died"

    def dies_when_forked(item, job):
        if os.getpid() != parent:
            died.write_text(str(item[0]))
            os._exit(3)  # the forked process dies on the first file it takes
        time.sleep(0.2)  # while this process is slow: the forked one takes one
        return real(item, job)

    monkeypatch.setattr(pool, "analyse", dies_when_forked)
    pooled = run(plan, files).results  # its file is analysed in the next round
    assert died.exists() and pooled == alone
    monkeypatch.setattr(pool, "analyse", real)

    def refused(process):
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(multiprocessing.context.ForkProcess, "start", refused)
    assert run(plan, files).results == alone  # no process to fork: all here
    item, context = pool.item_of(pool.Task(0, files[0], ())), multiprocessing.get_context("fork")
    lost = pool._Shared([item], [1], job, None, context)
    lost.front.value, lost.ended[1] = 1, 3  # taken by a forked process that ended
    assert "worker process ended: exit code 3" in (lost._wait(0, 1).error or "")
    lost.front.value = 0  # taken by no process (a stop was asked for first)
    assert lost._wait(0, 1) is None
    shared = pool._Shared([item] * 3, [5, 1, 3], job, None, context)  # sizes of 3 files
    taken = [shared._take(), shared._take(smallest=True), shared._take(), shared._take()]
    assert taken == [0, 1, 2, None]  # forked processes the largest, this one the smallest


def test_a_run_sets_what_outlives_each_file_apart_from_the_collector_until_it_ends(
    tmp_path, monkeypatch
):
    files = _many(tmp_path, 4)
    config = load_config(None)
    plan = plan_of(config)
    monkeypatch.setenv(pool.WORKERS_ENV, "1")
    frozen: list[int] = []
    run(plan, files, on_result=lambda r: frozen.append(gc.get_freeze_count()))
    assert all(n > 0 for n in frozen) and gc.get_freeze_count() == 0  # given back after
    gc.freeze()  # a process that freezes objects itself is left alone
    try:
        held = gc.get_freeze_count()
        run(plan, files)
        assert 0 < gc.get_freeze_count() <= held  # (frozen objects freed meanwhile)
    finally:
        gc.unfreeze()


@pytest.mark.slow
def test_pool_with_cache_and_fix(tmp_path, monkeypatch):
    files = _many(tmp_path, 24)
    config = load_config(None)
    monkeypatch.setenv(pool.WORKERS_ENV, "2")
    monkeypatch.setattr(pool, "MIN_POOL_BYTES", 0)
    plan = plan_of(config, ("TL201",), unsafe=True)
    cache = tmp_path / "cache"
    fixable = [f for f in files if "DataLoader(ds" in f.read_text() and "(:" not in f.read_text()]
    first = run(plan, files, Mode.FIX, cache_dir=cache).results
    assert sum(bool(r.fixed) for r in first) == len(fixable) > 0
    second = run(plan, files, Mode.FIX, cache_dir=cache).results
    assert not any(r.fixed for r in second)
    third = run(plan, files, Mode.FIX, cache_dir=cache).results  # from the cache
    assert [(r.path, r.error, r.violations) for r in third] == [
        (r.path, r.error, r.violations) for r in second
    ]


def test_small_runs_stay_in_process(tmp_path, monkeypatch):
    monkeypatch.setenv(pool.WORKERS_ENV, "4")
    tasks = [pool.Task(i, p, ()) for i, p in enumerate(_many(tmp_path, 10))]
    assert pool._pool_size(tasks)[0] == 1
