"""The linter and fix engine: suppressions, fix passes, imports, invalid fixes.

The engine is exercised through a test rule, TLX01 (reported as TL201 so that noqa codes
read naturally), that reports every DataLoader without workers and adds them as TL201's
fix does: an edit of the call, an import and a module-level definition. What TL201 itself
decides is for its own tests."""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst
import pytest

from torchlint.config.load import default_options
from torchlint.edits import workers_fix
from torchlint.fixes import (
    Applicability,
    Edit,
    FixSafety,
    Import,
    InsertAfter,
    Replace,
    fix,
    statements,
)
from torchlint.lint import linter, parser
from torchlint.lint.linter import Linter
from torchlint.lint.noqa import add_noqa, parse_suppressions
from torchlint.lint.parser import InvalidSyntax
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import MISSING, Settings, TorchModule

HEADER = "import torch\nfrom torch.utils.data import DataLoader\n"


class _EveryLoader(Rule):
    code = "TL201"
    name = "every-loader"
    fix_safety = FixSafety.UNSAFE
    tokens = ("DataLoader",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        for loader in module.loaders.sites:
            if loader.arg("num_workers") is MISSING:
                yield self.diagnostic(
                    loader.call.node, "no workers", workers_fix(loader, "Set num_workers")
                )


def tl201() -> Linter:
    return Linter([_EveryLoader()], Settings(options=default_options()))


@pytest.mark.parametrize(
    "code",
    [
        "x = DataLoader(ds)  # noqa: TL201\n",
        "x = DataLoader(ds)  # noqa\n",
        "x = DataLoader(ds)  # NOQA:TL201,TL202\n",
        "x = DataLoader(  # noqa: TL201\n    ds,\n)\n",
        "x = DataLoader(\n    ds,\n)  # noqa: TL201\n",
        "# torchlint: noqa\nx = DataLoader(ds)\n",
        "# torchlint: noqa: TL201\nx = DataLoader(ds)\n",
    ],
)
def test_noqa_forms_suppress(code):
    assert tl201().lint(HEADER + code) == []


@pytest.mark.parametrize(
    "code",
    [
        "x = DataLoader(ds)  # noqa: TL202\n",
        "x = DataLoader(ds)\ny = 1  # noqa\n",
        'x = DataLoader(ds, collate_fn="# noqa")\n',
        "x = DataLoader(\n    ds,\n    batch_size=2,  # noqa: TL201 (inner line)\n)\n",
    ],
)
def test_noqa_elsewhere_does_not_suppress(code):
    assert [v.code for v in tl201().lint(HEADER + code)] == ["TL201"]


def test_logical_lines_span_statements():
    s = parse_suppressions("a = f(\n  1,\n)  # noqa\nb = 2\n")
    assert s.suppressed("TL201", 1) and not s.suppressed("TL201", 4)


def test_fix_adds_import_once_and_is_idempotent():
    source = HEADER + "\na = DataLoader(x)\nb = DataLoader(y)\n"
    outcome = tl201().fix(source, unsafe=True)
    assert outcome.fixed == ["TL201", "TL201"]
    assert outcome.text.count("import os\n") == 1 and outcome.text.count("NUM_WORKERS = ") == 1
    assert tl201().fix(outcome.text, unsafe=True).text == outcome.text


def test_unsafe_fix_needs_opt_in():
    source = HEADER + "a = DataLoader(x)\n"
    outcome = tl201().fix(source, unsafe=False)
    assert outcome.text == source and outcome.fixed == []
    assert [v.fix.applicability for v in outcome.remaining if v.fix] == ["unsafe"]


def test_existing_import_and_definition_are_reused():
    source = HEADER + "import os\nNUM_WORKERS = 3\na = DataLoader(x)\n"
    text = tl201().fix(source, unsafe=True).text
    assert (
        text == HEADER + "import os\nNUM_WORKERS = 3\na = DataLoader(x, num_workers=NUM_WORKERS)\n"
    )


def test_docstring_and_future_stay_first():
    source = '"""Doc."""\nfrom __future__ import annotations\n' + HEADER + "a = DataLoader(x)\n"
    text = tl201().fix(source, unsafe=True).text
    assert text.startswith('"""Doc."""\nfrom __future__ import annotations\nimport torch\n')


class BreaksCode(Rule):
    """TL999 breaks-code: a fix that CPython parses but cannot compile (for the test): a
    repeated keyword argument, or a `return` at module level."""

    code = "TL999"
    name = "breaks-code"
    fix_safety = FixSafety.SAFE

    def __init__(self, how: str) -> None:
        self.how = how

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        for loader in module.loaders.sites:
            node = loader.call.node
            if self.how == "keyword":
                repeated = cst.Arg(cst.Integer("2"), keyword=cst.Name("ds"))
                edit: Edit = Replace(node, node.with_changes(args=[*node.args, repeated]))
            else:
                edit = InsertAfter(loader.call.ctx.statement, statements("return 1"))
            yield self.diagnostic(
                node, "bad", fix("break", Applicability.SAFE, edit, imports=[Import("os")])
            )


@pytest.mark.parametrize("how", ["keyword", "return"])
def test_fix_producing_invalid_code_is_refused(how):
    """The fix alone is left out (CPython parses both: it compiles neither), and its
    finding says why."""
    source = HEADER + "a = DataLoader(ds=1)\n"
    outcome = Linter([BreaksCode(how)]).fix(source)
    assert outcome.text == source and outcome.fixed == []
    assert [(v.message, v.fix) for v in outcome.remaining] == [
        ("bad (not fixed: the fixed code would not compile)", None)
    ]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("import torch\nx = torch.zeros(3\n", "syntax error at 2:16: '(' was never closed"),
        ("import torch\nx = (\n", "syntax error at 2:5: '(' was never closed"),
        (HEADER + "é = DataLoader(ds) +\n", "syntax error at 3:21: invalid syntax"),
        (HEADER + "def f():\n  return 1\n return 2\n", "syntax error at 5:10: unindent "),
    ],
)
@pytest.mark.parametrize("method", ["lint", "fix"])
def test_syntax_errors_are_reported_where_cpython_reports_them(source, message, method):
    """Text no rule reads is checked too; one position, in characters, 1-based."""
    with pytest.raises(InvalidSyntax) as caught:
        getattr(tl201(), method)(source)
    assert str(caught.value).startswith(message)


def test_a_syntax_error_only_libcst_finds_is_reported_at_its_one_position(monkeypatch):
    monkeypatch.setattr(parser, "_cpython_refusal", lambda source, path: None)
    with pytest.raises(InvalidSyntax) as caught:
        tl201().lint(HEADER + "x = DataLoader(ds) +\n")
    message = str(caught.value)
    assert message.startswith("syntax error at 4:1: expected one of ")
    assert re.findall(r"\d+:\d+", message) == ["4:1"]


def test_what_cpython_refuses_beyond_its_grammar_is_libcsts_to_judge(monkeypatch):
    """CPython's syntax check reads the text into symbol tables, which refuse a `nonlocal`
    at module level or a repeated parameter: libcst, whose verdict told files get, parses
    the text then, and the file is no more an error than a file a rule reads."""
    parsed: list[str] = []
    parse = parser.parser_thread.parse
    monkeypatch.setattr(parser.parser_thread, "parse", lambda s: parsed.append(s) or parse(s))
    for source in ("nonlocal x\n", "def f(a, a):\n    pass\n"):
        assert tl201().lint(source) == []
    assert len(parsed) == 2
    assert tl201().lint("x = 1\n") == [] and len(parsed) == 2  # CPython accepts: no libcst


def test_syntax_newer_than_this_python_is_not_an_error():
    """libcst accepts PEP 695 (Python 3.12) where an older CPython refuses it."""
    assert tl201().lint("type Vector = list[float]\n") == []
    assert [v.code for v in tl201().lint(HEADER + "type X = int\nx = DataLoader(ds)\n")] == [
        "TL201"
    ]


def test_a_call_grown_too_long_is_split_one_argument_per_line():
    short = HEADER + "loader = DataLoader(ds)\n"
    assert "DataLoader(ds, num_workers=NUM_WORKERS)\n" in tl201().fix(short, unsafe=True).text
    long = (
        HEADER
        + "def f():\n    loader = DataLoader(training_dataset, batch_size=64, shuffle=True)\n"
    )
    text = tl201().fix(long, unsafe=True).text
    assert text.endswith(
        "    loader = DataLoader(\n"
        "        training_dataset,\n"
        "        batch_size=64,\n"
        "        shuffle=True,\n"
        "        num_workers=NUM_WORKERS,\n"
        "    )\n"
    )


@pytest.mark.parametrize(
    ("source", "wanted", "expected"),
    [
        ("x = 1\n", {1: {"TL201"}}, "x = 1  # noqa: TL201\n"),
        ("x = 1  # why\n", {1: {"TL201"}}, "x = 1  # why  # noqa: TL201\n"),
        ("x = 1  # noqa: E501\n", {1: {"TL202", "TL201"}}, "x = 1  # noqa: E501, TL201, TL202\n"),
        ("x = 1  # noqa\n", {1: {"TL201"}}, None),  # a bare noqa covers it
        ("x = 1  # noqa: TL201\n", {1: {"TL201"}}, None),
        ("x = f(\n    1,\n)\n", {1: {"TL201"}}, "x = f(  # noqa: TL201\n    1,\n)\n"),
        # The line ends inside a string: the comment goes after the statement.
        ('x = f("""a\nb""", 2)\n', {1: {"TL201"}}, 'x = f("""a\nb""", 2)  # noqa: TL201\n'),
        ("x = 1\r\ny = 2", {2: {"TL201"}}, "x = 1\r\ny = 2  # noqa: TL201"),
    ],
)
def test_add_noqa(source, wanted, expected):
    out, changed = add_noqa(source, wanted)
    assert out == (source if expected is None else expected)
    assert changed == (0 if expected is None else 1)
    suppressions = parse_suppressions(out)
    assert all(suppressions.suppressed(c, line) for line, cs in wanted.items() for c in cs)


class _Broken(Rule):
    code = "TL402"
    name = "broken"
    tokens = ("DataLoader",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        yield self.diagnostic(module.module, "half a report")  # dropped with the rest
        raise ValueError("a bug in a rule")


def test_a_rule_that_raises_costs_only_its_own_findings_when_a_handler_is_given():
    source = HEADER + "x = DataLoader(ds)\n"
    with pytest.raises(ValueError, match="a bug in a rule"):  # no handler: as before
        Linter([_Broken(), _EveryLoader()]).lint(source)
    failed: list[tuple[str, str]] = []
    linter = Linter(
        [_Broken(), _EveryLoader()], on_rule_error=lambda c, e: failed.append((c, str(e)))
    )
    assert [v.code for v in linter.lint(source)] == ["TL201"]
    assert failed == [("TL402", "a bug in a rule")]
    assert "num_workers" in linter.fix(source, unsafe=True).text


def test_fix_edits_only_for_the_findings_asked_for():
    source = HEADER + "x = DataLoader(ds)\ny = DataLoader(ds)\n"
    everything = tl201().lint(source, with_edits=True)
    assert [bool(v.fix and v.fix.edits) for v in everything] == [True, True]
    second = ("TL201", 4, 5)
    some = tl201().lint(source, with_edits={second})
    assert [bool(v.fix and v.fix.edits) for v in some] == [False, True]
    assert some[1].fix == everything[1].fix
    assert [(v.code, v.line, v.column) for v in some][1] == second


def test_a_rule_pattern_narrows_its_tokens(monkeypatch):
    """A file with a token but without the rule's pattern is never parsed for it."""

    class Narrow(_EveryLoader):
        pattern = re.compile(r"DataLoader\(ds\b")

    parsed: list[str] = []
    monkeypatch.setattr(
        linter, "parse", lambda source, path: parsed.append(path) or cst.parse_module(source)
    )
    narrow = Linter([Narrow()], Settings(options=default_options()))
    assert narrow.lint(HEADER + "x = DataLoader(other)\n", "skipped.py") == []
    assert [v.line for v in narrow.lint(HEADER + "x = DataLoader(ds)\n", "read.py")] == [3]
    assert parsed == ["read.py"]


def test_the_linter_applies_a_rules_guards_before_it_checks():
    """`skips_managed`: silent where a framework owns the devices; `min_torch`: silent
    where the project supports an older torch (unknown target: the rule runs)."""

    class Guarded(_EveryLoader):
        skips_managed = True
        min_torch = (2, 0)

    plain = HEADER + "x = DataLoader(ds)\n"
    managed = "import lightning as L\n" + plain + "L.Trainer().fit(net, x)\n"

    def lines(text: str, target: tuple[int, int] | None = None) -> list[int]:
        settings = Settings(options=default_options(), target_torch=target)
        return [v.line for v in Linter([Guarded()], settings).lint(text, "t.py")]

    assert lines(plain) == lines(plain, (2, 0)) == [3]
    assert lines(plain, (1, 13)) == []
    assert lines(managed) == []


def test_a_text_is_screened_once_per_token_and_pattern():
    """Rules share tokens, and the run and the linter screen the same text: each token and
    pattern is searched once per text, and another text is searched anew."""
    from torchlint.lint import tokens

    searched: list[str] = []

    class Counted:  # a pattern that counts its searches
        def search(self, text: str) -> object:
            searched.append(text)
            return re.search(r"\.cuda\(", text)

    class A(_EveryLoader):
        tokens = ("cuda", "DataLoader")
        pattern = Counted()

    class B(_EveryLoader):
        tokens = ("cuda",)
        pattern = A.pattern

    gpu, cpu = HEADER + "x.cuda()\n", HEADER + "x.cpu()\n"
    knowledge = Settings().knowledge
    assert tokens.applies([A, B], gpu, knowledge) == [A, B]
    assert tokens.any_applies([A, B], gpu, knowledge)
    assert tokens.applies([A, B], cpu, knowledge) == []  # a token (DataLoader), not the pattern
    assert searched == [gpu, cpu]


def test_an_analysed_files_tree_is_freed_without_the_cyclic_collector():
    """The model's cycles are undone when a file's analysis ends (`TorchModule.release`):
    its tree goes with the last reference, not with a collection over every node."""
    import gc
    from pathlib import Path

    from torchlint.lint.registry import builtin_rules
    from torchlint.semantic.external import Environment

    fixtures = Path(__file__).parent.parent / "fixtures"
    source = (fixtures / "TL401" / "bad_per_step_functions.py").read_text()
    rules = [rule() for rule in builtin_rules().values()]
    settings = Settings(options=default_options())
    gc.collect()
    gc.disable()
    try:
        for env in (None, Environment(path="train.py")):  # alone, and in a project
            module = parser.parse(source)
            tree = id(module)
            found, _ = Linter(rules, settings)._diagnostics(module, "train.py", rules, env=env)
            assert found
            del module
            assert not any(type(o) is cst.Module and id(o) == tree for o in gc.get_objects())
    finally:
        gc.enable()
