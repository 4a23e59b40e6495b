"""Files as they come: line endings, encodings, sizes, nesting, permissions, races.

Through the real command where the process matters (exit codes, no traceback, what is
on disk afterwards), in-process where a race has to be staged.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import warnings
from pathlib import Path

import pytest

from torchlint.config.load import instantiate, load_config
from torchlint.lint import parser
from torchlint.lint.linter import Linter
from torchlint.lint.parser import MAX_SYNTAX_TOKENS, MAX_TOKENS, LintError, parse
from torchlint.results import Job
from torchlint.run.runner import discover, display, process_file

from .conftest import LOADER, plan_of, run_cli, run_cli_unprivileged, unprivileged

HEAD = "import torch\nfrom torch.utils.data import DataLoader\n"
# TL502's fix in the layout tests: it applies wherever the call is (of low impact: shown).
LOW = "--show-low-impact"
EXPLICIT = "scaler = torch.cuda.amp.GradScaler()"
NOTEBOOK = json.dumps(
    {
        "cells": [
            {"cell_type": "code", "metadata": {}, "outputs": [], "source": source}
            for source in (HEAD, EXPLICIT)
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
)
FIXED_CALL = 'scaler = torch.amp.GradScaler("cuda")'
LOADER_FIXED = "pin_memory=True, num_workers=NUM_WORKERS)"  # TL201's fix of LOADER


def _ok(result, code: int = 0) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == code, result.stdout + result.stderr


def _fix_twice(tmp_path: Path, name: str) -> bytes:
    """`fix --unsafe-fixes` twice: the second run changes nothing; the result compiles."""
    _ok(run_cli("fix", "--unsafe-fixes", LOW, "--no-cache", name, cwd=tmp_path))
    once = (tmp_path / name).read_bytes()
    _ok(run_cli("fix", "--unsafe-fixes", LOW, "--no-cache", name, cwd=tmp_path))
    assert (tmp_path / name).read_bytes() == once
    return once


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
def test_line_endings_kept(tmp_path, newline):
    source = (HEAD + f"def f(opt):\n\tif 1:\n\t\t{EXPLICIT}  # tabs\n").replace("\n", newline)
    (tmp_path / "t.py").write_bytes(source.encode())
    result = run_cli("check", LOW, "--output-format", "concise", "t.py", cwd=tmp_path)
    _ok(result, 1)
    assert "t.py:5:12: TL502" in result.stdout  # columns count characters
    data = _fix_twice(tmp_path, "t.py")
    assert FIXED_CALL.encode() in data
    others = {"\n": b"\r", "\r\n": b"", "\r": b"\n"}[newline]
    rest = data.replace(newline.encode(), b"")
    assert b"\n" not in rest and b"\r" not in rest and (not others or others not in data)
    compile(data, "t.py", "exec")


def test_mixed_line_endings_and_no_final_newline(tmp_path):
    (tmp_path / "t.py").write_bytes(
        b"import torch\r\nfrom torch.utils.data import DataLoader\n" + EXPLICIT.encode()
    )
    data = _fix_twice(tmp_path, "t.py")
    assert data.startswith(b"import torch\r\nfrom torch.utils.data import DataLoader\n")
    assert data.endswith(FIXED_CALL.encode())


def test_bom_and_latin1_round_trip(tmp_path):
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbf" + LOADER.encode() + "s = 'é'\n".encode())
    (tmp_path / "latin.py").write_bytes(
        b"# -*- coding: latin-1 -*-\n" + LOADER.encode() + b"s = 'caf\xe9'  # \xe9\n"
    )
    for name in ("bom.py", "latin.py"):
        data = _fix_twice(tmp_path, name)
        assert LOADER_FIXED.encode() in data
    assert (tmp_path / "bom.py").read_bytes().startswith(b"\xef\xbb\xbfimport os\n")
    latin = (tmp_path / "latin.py").read_bytes()
    assert b"s = 'caf\xe9'  # \xe9\n" in latin
    assert latin.decode("latin-1").startswith("# -*- coding: latin-1 -*-\n")


def test_fix_that_cannot_be_encoded_is_refused(tmp_path):
    # The fix itself is ASCII, so encoding trouble can only come from a rule's text;
    # the engine must report it rather than write a half-encoded file.
    from torchlint.text.source import SourceError, SourceFile, write_source

    path = tmp_path / "latin.py"
    path.write_bytes(b"# -*- coding: latin-1 -*-\nx = 1\n")
    source = SourceFile(path, path.read_bytes(), "# -*- coding: latin-1 -*-\nx = 1\n", "latin-1")
    with pytest.raises(SourceError, match="cannot be encoded"):
        write_source(source, "# -*- coding: latin-1 -*-\nx = '€'\n")
    assert path.read_bytes() == b"# -*- coding: latin-1 -*-\nx = 1\n"


@pytest.mark.slow
def test_very_long_line_and_many_lines(tmp_path):
    long_line = "x = [" + ", ".join(str(i) for i in range(20_000)) + "]\n"
    (tmp_path / "long.py").write_text(LOADER + long_line)
    lines = (MAX_TOKENS - 100) // 3  # as many as memory allows analysing: 24k lines
    body = "".join(f"v{i} = {i}\n" for i in range(lines))
    (tmp_path / "big.py").write_text(LOADER + body)
    result = run_cli("check", "--output-format", "concise", ".", cwd=tmp_path)
    _ok(result, 1)
    assert "big.py:3:10: TL201" in result.stdout
    assert "long.py:3:10: TL201" in result.stdout


NESTED = {
    "binary": "x = " + " + ".join(["a"] * 20_000),
    "unary": "x = " + "-" * 20_000 + "1",
    "attribute": "x = a" + ".b" * 20_000,
    "calls": "x = f" + "(g" * 3_000 + ")" * 3_000,
    "brackets": "x = " + "[" * 3_000 + "]" * 3_000,
    "ternary": "x = 1" + " if c else 1" * 5_000,
    "boolean": "x = " + " and ".join(["a"] * 20_000),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(NESTED))
def test_deeply_nested_code_is_a_clear_error(tmp_path, kind):
    (tmp_path / "deep.py").write_text(LOADER + NESTED[kind] + "\n")
    (tmp_path / "ok.py").write_text(LOADER)
    result = run_cli("check", "--output-format", "concise", ".", cwd=tmp_path)
    _ok(result, 2)
    assert "deep.py:1:1: TL901 expression nested too deeply to analyse" in result.stdout
    assert result.stderr == ""  # the report on the terminal says it
    assert "ok.py:3:10: TL201" in result.stdout  # the other files are still linted


def test_text_that_may_nest_deeply_is_checked_by_cpython_first():
    levels = parser.DEEP_LEVELS
    shapes = {  # each level of these takes one token the bound counts
        "negation": "x = " + "not " * levels + "a",
        "ternary": "x = a" + " if b else a" * levels,
        "boolean": "x = " + " or ".join(["a"] * (levels + 1)),
        "power": "x = " + "a**" * levels + "a",
        "lambda": "x = " + "lambda: " * levels + "a",
        "strings": "x = " + "'a' " * levels,
        "calls": "x = f" + "()" * levels,
        "elif": "if a: pass\n" + "elif a: pass\n" * levels,
        "comprehension": "x = [a " + "for a in b " * levels + "]",
        "lines": "x = [\n" + "[\n" * levels + "]\n" * (levels + 1),
    }
    for kind, text in shapes.items():
        assert parser._may_nest_deeply(text), kind
    # Long functions with no blank line are not deep: libcst alone parses them.
    body = "".join(f"    value_{i} = compute(value_{i - 1}, axis=1)\n" for i in range(1, 400))
    flat = "def long():\n" + body
    assert len(flat) > 4 * levels and not parser._may_nest_deeply(flat)
    assert parser._may_nest_deeply(flat + "\n" + shapes["negation"])


@pytest.mark.slow
def test_nesting_python_accepts_is_linted_or_refused_cleanly():
    # Deep but legal: either analysed, or a LintError; never a crash or RecursionError.
    linter = Linter(_rules())
    for depth in (100, 400, 900, 1500):
        source = LOADER + "x = " + " + ".join(["a"] * depth) + "\n"
        try:
            found = linter.lint(source)
        except LintError as exc:
            assert "nested too deeply" in str(exc)
        else:
            assert [v.code for v in found] == ["TL201"]


@pytest.mark.slow
def test_parse_has_a_large_stack():
    # 2,500 levels: over what libcst's parser survives on a 1 MB stack, under what
    # CPython refuses; parsed (on the parser thread) or refused, never a crash.
    source = "x = " + " + ".join(["a"] * 2_500) + "\n"
    with contextlib.suppress(LintError):
        parse(source)


def test_read_only_file_is_reported_not_written(tmp_path):
    target = tmp_path / "t.py"
    target.write_text(LOADER)
    target.chmod(0o444)  # respected even by root, who could write it
    (tmp_path / "ok.py").write_text(LOADER)
    result = run_cli("fix", "--unsafe-fixes", ".", cwd=tmp_path)
    _ok(result, 2)
    assert "t.py:1:1: TL900 permission denied (file is read-only); not written" in result.stdout
    assert target.read_text() == LOADER
    assert LOADER_FIXED in (tmp_path / "ok.py").read_text()
    names = sorted(p.name for p in tmp_path.iterdir() if p.name != ".torchlint_cache")
    assert names == ["ok.py", "t.py"]  # no temporary file left behind


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("cache", [(), ("--no-cache",)])
def test_fifos_and_sockets_named_py_are_skipped_with_a_warning(tmp_path, cache):
    """Reading a FIFO waits for a writer: the run must neither hang nor fail on one."""
    (tmp_path / "ok.py").write_text(LOADER)
    os.mkfifo(tmp_path / "pipe.py")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "sock.py"))
        for args in ((".",), ("pipe.py", "ok.py")):
            result = run_cli(
                "check", *cache, "--output-format", "concise", *args, cwd=tmp_path, timeout=60
            )
            _ok(result, 1)
            assert "ok.py:3:10: TL201" in result.stdout
            warnings = [line for line in result.stderr.splitlines() if line]
            expected = ["torchlint: warning: pipe.py: a FIFO, not a regular file; skipped"]
            if args == (".",):
                expected.append(
                    "torchlint: warning: sock.py: a socket, not a regular file; skipped"
                )
            assert warnings == expected


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_file_replaced_by_a_fifo_after_discovery_is_an_error_not_a_wait(tmp_path):
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    done = threading.Event()

    def writer() -> None:  # should a read wait after all, end it: the test fails, not hangs
        if not done.wait(10):
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    threading.Thread(target=writer, daemon=True).start()
    job = Job(codes=("TL201",), settings=load_config(None).settings())
    result = process_file(fifo, job, ["TL201"])
    done.set()
    assert result.error == "a FIFO, not a regular file"


def test_a_file_too_large_to_analyse_is_syntax_checked_with_a_warning(tmp_path):
    """Memory is bounded by the largest file analysed: a larger one is not parsed by
    libcst (generated tables of numbers, mostly), and says so."""
    table = "TABLE = [" + "1, " * (MAX_TOKENS // 2) + "]\n"
    (tmp_path / "big.py").write_text(LOADER + table)
    (tmp_path / "ok.py").write_text(LOADER)
    warning = "torchlint: warning: big.py: too large to analyse ("
    for _ in range(2):  # the second run answers from the cache, warning included
        result = run_cli("check", "--output-format", "concise", ".", cwd=tmp_path)
        _ok(result, 1)
        lines = result.stdout.splitlines()
        # A note of its own in the report (every format), and the summary says so.
        assert lines[0].startswith("big.py:1:1: TL903 too large to analyse (")
        assert lines[1].startswith("ok.py:3:10: TL201")
        assert "Found 1 problem." in lines and "1 file skipped: not analysed" in lines[-1]
        assert result.stderr.startswith(warning), result.stderr
        assert f"(over {MAX_TOKENS:,} tokens); checked for syntax only" in result.stderr
    (tmp_path / "ok.py").unlink()
    alone = run_cli("check", ".", cwd=tmp_path)
    _ok(alone, 0)
    assert "All checks passed!" not in alone.stdout
    assert "No problems found in the files analysed.\n1 file skipped" in alone.stdout
    (tmp_path / "ok.py").write_text(LOADER)
    (tmp_path / "big.py").write_text(LOADER + table + "x = (\n")
    result = run_cli("fix", "--unsafe-fixes", "big.py", cwd=tmp_path)
    _ok(result, 2)
    assert result.stdout.startswith("big.py:11:5: TL000 SyntaxError: '(' was never closed\n")


def _parsers_refused(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("a parser was run")

    monkeypatch.setattr(parser.parser_thread, "parse", refuse)
    monkeypatch.setattr(parser, "_cpython_refusal", refuse)


def test_a_generated_50_mb_file_is_not_parsed_at_all(tmp_path, monkeypatch):
    """Above MAX_SYNTAX_TOKENS even CPython's parser would need gigabytes (8 GB and 40 s
    for this file): neither parser runs, the warning says so, and it is not an error.
    (The time and memory of this run: benchmarks/big_file.py.)"""
    path = tmp_path / "table.py"
    path.write_text(
        "TABLE = [\n" + "    (123456, 0.123456, 'name_123456', [1, 2, 3]),\n" * 1_000_000 + "]\n"
    )
    assert path.stat().st_size > 50_000_000
    _parsers_refused(monkeypatch)
    codes = tuple(load_config(None).selected_codes())
    job = Job(codes=codes, settings=load_config(None).settings())
    result = process_file(path, job, codes)
    assert result.error is None and result.violations == []
    assert result.warning is not None
    assert result.warning.startswith(f"too large to check (over {MAX_SYNTAX_TOKENS:,} tokens")


def test_a_file_above_the_analysis_guard_is_checked_by_cpython_alone(monkeypatch):
    """libcst's tree of such a file (with or without rule tokens) would take hundreds of
    megabytes: CPython's parser is the only judge, even where it refuses the text."""
    table = "TABLE = [" + "1, " * MAX_TOKENS + "]\n"
    lint = Linter(instantiate(["TL201"])).lint
    monkeypatch.setattr(parser.parser_thread, "parse", lambda *a: pytest.fail("libcst parsed"))
    assert lint(table) == []  # no rule's token: a syntax check, passed
    with pytest.raises(parser.TooLarge, match="checked for syntax only"):
        lint(LOADER + table)
    for head in ("", LOADER):
        with pytest.raises(parser.InvalidSyntax) as caught:
            lint(head + table + "x = (\n")
        assert caught.value.line == head.count("\n") + 2


def _findings(result) -> list[tuple[str, int, int]]:
    found = json.loads(result.stdout)
    return [(v["filename"], v["location"]["row"], v["location"]["column"]) for v in found]


def test_a_file_that_cannot_be_written_reports_the_findings_on_disk(tmp_path):
    """Not those of the fixed text that was never written (there, none would remain)."""
    target = tmp_path / "t.py"
    target.write_text(LOADER + EXPLICIT + "\n")
    target.chmod(0o444)
    args = ("--unsafe-fixes", LOW, "--no-cache", "--output-format", "json", "t.py")
    fixing = run_cli("check", "--fix", *args, cwd=tmp_path)
    _ok(fixing, 2)
    assert _findings(fixing) == [("t.py", 1, 1), ("t.py", 3, 10), ("t.py", 10, 10)]
    assert json.loads(fixing.stdout)[0]["code"] == "TL900"  # the write error, then the findings
    checking = run_cli("check", *args, cwd=tmp_path)
    assert json.loads(fixing.stdout)[1:] == json.loads(checking.stdout)
    text = run_cli("fix", "--unsafe-fixes", LOW, "--no-cache", "t.py", cwd=tmp_path)
    assert text.stdout.endswith("Found 3 problems.\n[*] 2 fixable with `--fix`.\n")


@pytest.mark.slow
@unprivileged
def test_a_read_only_directory_reports_the_findings_on_disk(tmp_path):
    project = tmp_path / "ro"
    project.mkdir()
    (project / "t.py").write_text(LOADER)
    (project / "t.py").chmod(0o666)  # writable: only the directory refuses the new file
    (project / "nb.ipynb").write_text(NOTEBOOK)
    (project / "nb.ipynb").chmod(0o666)
    project.chmod(0o555)
    tmp_path.chmod(0o755)
    try:
        args = ("--unsafe-fixes", LOW, "--no-cache", "--output-format", "json", ".")
        result = run_cli_unprivileged("check", "--fix", *args, cwd=project)
    finally:
        project.chmod(0o755)
    _ok(result, 2)
    assert [line for line in result.stderr.splitlines() if "error" in line] == [
        "torchlint: error: nb.ipynb: cannot write: Permission denied",
        "torchlint: error: t.py: cannot write: Permission denied",
    ]
    found = [v for v in json.loads(result.stdout) if v["code"] != "TL900"]
    assert [(v["filename"], v["location"]["row"], v["cell"]) for v in found] == [
        ("nb.ipynb", 1, 2),
        ("t.py", 3, None),
    ]
    assert (project / "t.py").read_text() == LOADER
    assert (project / "nb.ipynb").read_text() == NOTEBOOK


def test_file_changed_between_read_and_write_is_not_clobbered(tmp_path, monkeypatch):
    import torchlint.run.runner as runner

    target = tmp_path / "t.py"
    target.write_text(LOADER)
    edited = LOADER + "# the user saved this meanwhile\n"
    real = runner.lint_text

    def lint_then_user_saves(*args, **kwargs):
        result = real(*args, **kwargs)
        target.write_text(edited)
        return result

    monkeypatch.setattr(runner, "lint_text", lint_then_user_saves)
    job = Job(codes=("TL201",), settings=load_config(None).settings(), fix=True, unsafe=True)
    result = process_file(target, job, ["TL201"])
    assert result.error == "file changed on disk while torchlint ran; not written"
    assert result.fixed == []
    assert target.read_text() == edited


def test_fix_keeps_compiler_warnings_to_itself_and_accepts_newer_syntax(tmp_path):
    (tmp_path / "warn.py").write_text(LOADER + "if loader is 1:\n    s = '\\d'\n")
    newer = "type Alias = list[int]\n" if sys.version_info < (3, 12) else "x = 1\n"
    (tmp_path / "newer.py").write_text(LOADER + newer)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one raised in the analysis fails the file
        result = run_cli("fix", "--unsafe-fixes", ".", cwd=tmp_path)
    _ok(result)
    assert "Warning" not in result.stderr
    for name in ("warn.py", "newer.py"):
        assert LOADER_FIXED in (tmp_path / name).read_text()


def test_bug_in_a_rule_is_reported_on_the_file(tmp_path, monkeypatch):
    import torchlint.run.runner as runner
    from torchlint.rule import Rule
    from torchlint.run.files import run

    class Broken(Rule):
        code = "TL999"
        name = "broken"
        tokens = ("boom",)

        def check(self, module):
            raise AttributeError("no such thing")

    monkeypatch.setattr(runner, "instantiate", lambda codes, rules=None: [Broken()])
    (tmp_path / "a.py").write_text("boom = 1\n")
    (tmp_path / "b.py").write_text("fine = 1\n")
    config = load_config(None)
    a, b = run(plan_of(config, ("TL999",)), [tmp_path / "a.py", tmp_path / "b.py"]).results
    assert a.error is not None and a.error.startswith("internal error (AttributeError")
    assert b.error is None


def _rules():
    from torchlint.config.load import instantiate

    return instantiate(load_config(None).selected_codes())


def test_parser_falls_back_to_the_callers_stack(monkeypatch):
    import threading

    from torchlint.lint.parser import _ParserThread

    def refuse(size=0):
        raise ValueError("size not valid")

    monkeypatch.setattr(threading, "stack_size", refuse)
    parser = _ParserThread()
    assert parser.parse("x = 1\n").code == "x = 1\n"
    assert parser.thread is None


def test_a_link_to_a_directory_named_like_a_python_file_is_a_warning(tmp_path):
    """Links to directories are not followed (as git and ruff do not); one named `x.py`
    looks like a file to check, so it is named in a warning, not skipped in silence."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(LOADER)
    (tmp_path / "x.py").symlink_to(tmp_path / "pkg", target_is_directory=True)
    (tmp_path / "lib").symlink_to(tmp_path / "pkg", target_is_directory=True)
    found = discover([str(tmp_path)], load_config(None))
    assert found.files == [tmp_path / "pkg" / "a.py"]
    link = display(tmp_path / "x.py")
    assert found.warnings == [f"{link}: a link to a directory, not followed; name it to check it"]
    named = discover([str(tmp_path / "x.py")], load_config(None))
    assert named.files == [tmp_path / "x.py" / "a.py"] and named.warnings == []
