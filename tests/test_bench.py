"""benchmarks/bench.py measures only runs that did their work: a crash, a run that
checked too few files or found nothing is refused, and no figure is printed."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from .conftest import FIXTURES, ROOT, benchmark

bench = benchmark("bench")
CRASH = (
    "Traceback (most recent call last):\nModuleNotFoundError: No module named 'torchlint.rules'\n"
)


def sample(returncode: int, stdout: str = "", stderr: str = ""):
    return bench.Sample(0.4, 0.5, 60.0, returncode, stdout, stderr)


def verbose(files: int, checked: int | None = None) -> str:
    lines = [f"torchlint: {files} file{'s' * (files != 1)} to check"]
    lines += [
        f"torchlint: checked f{i}.py: 0 findings"
        for i in range(files if checked is None else checked)
    ]
    return "\n".join(lines) + "\n"


def record(code: str = "TL201") -> str:
    return json.dumps({"code": code, "filename": "f0.py"}) + "\n"


def test_a_crash_is_not_a_figure():
    """The run issue #26 saw: exit 1 and a traceback, once counted as "findings"."""
    assert bench.checked(3)(sample(1, "", CRASH)) == "exit code 1, expected 0"
    assert bench.exits(0, 1)(sample(1, "", CRASH)) == "it crashed"
    assert bench.exits(0)(sample(0, "", "thread 'main' panicked at ...")) == "it crashed"


def test_a_torchlint_run_must_check_every_file_and_find_something():
    check = bench.checked(3)
    assert check(sample(0, record() * 5, verbose(3))) is None
    assert check(sample(0, record(), verbose(2))) == "it checked 2 of the 3 files"
    assert check(sample(0, record(), verbose(3, checked=1))) == "it checked 1 of the 3 files"
    assert check(sample(0, "", verbose(3))) == "it found nothing (the corpus has findings)"
    broken = check(sample(0, record("TL000") + record(), verbose(3)))
    assert broken == "1 file(s) could not be checked, f0.py first"


def test_other_tools_must_exit_as_expected_and_find_something():
    ruff = bench.exits(0, finding=r":\d+:\d+: [A-Z]+\d+")
    assert ruff(sample(0, "a.py:1:8: F401 `os` imported but unused\n")) is None
    assert ruff(sample(0, "")) == "it found nothing (the corpus has findings for every tool)"
    assert ruff(sample(2, "")) == "exit code 2, expected 0"
    assert bench.versioned(sample(0, "torchlint 0.1.0\n")) is None
    assert bench.versioned(sample(0, "")).startswith("it printed ''")


@pytest.mark.slow
def test_a_real_run_is_measured_and_a_crash_stops_the_benchmark(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(FIXTURES / "TL201" / "bad.py", tree / "bad.py")
    (tree / "clean.py").write_text("x = 1\n")
    args = ["check", "--no-cache", "--exit-zero", "-v", "--output-format", "json-lines"]
    tool = bench.Tool(
        "torchlint", [sys.executable, "-m", "torchlint", *args, str(tree)], bench.checked(2)
    )
    tool.run(ROOT)
    assert tool.samples[0].findings and tool.samples[0].cpu > 0
    crash = bench.Tool(
        "crash", [sys.executable, "-c", "import torchlint.nowhere"], bench.checked(2)
    )
    with pytest.raises(SystemExit, match="crash: exit code 1, expected 0; no figures printed"):
        crash.run(ROOT)
    assert crash.samples == []


def test_every_round_runs_every_tool_and_the_parse_floor_next_to_cold():
    """Rotated round by round; warm, then the edited file, after cold (they read its
    cache); the parse floor just before cold, then just after, round by round."""
    names = ["parse", "cold", "warm", "one", "torchfix", "ruff", "ten", "edited", "version"]
    tools = [bench.Tool(n, [], bench.exits(0)) for n in names]
    firsts = set()
    for r in range(len(names)):
        order = [t.name for t in bench.round_order(tools, r)]
        assert sorted(order) == sorted(names)
        cold = order.index("cold")
        assert [n for n in order[cold + 1 :] if n != "parse"][:2] == ["warm", "edited"]
        assert order.index("parse") == (cold - 1 if r % 2 == 0 else cold + 1)
        firsts.add(order[0])
    assert len(firsts) > len(names) // 2  # the order rotates
