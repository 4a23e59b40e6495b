"""Rule options: typed declarations, one declaration per name across rules (checked when
the rules are found), typed values, and their description in the docs and settings."""

from __future__ import annotations

import sys
import textwrap
from types import ModuleType

import libcst as cst
import pytest

from torchlint.docs import rule_markdown
from torchlint.lint import registry
from torchlint.lint.registry import OptionCollision, all_rules, options_of
from torchlint.options import MIN_BATCH_SIZE, Option, describe
from torchlint.options import TINY_NETWORK_BATCH_SIZE as TINY
from torchlint.rule import Rule
from torchlint.semantic import Settings, build

RATIO = Option("max-ratio", float, 0.5, (0, 1), "a ratio")


def test_every_numeric_option_declares_its_range():
    declared = options_of(all_rules())
    assert "min-batch-size" in declared
    for name, option in declared.items():
        assert option.name == name and option.doc
        if option.type in (int, float):
            assert option.bounds(), name
        assert option.problem(option.default) is None, name


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("n", int, 3, None, "x"), "a numeric option declares its range"),
        (("n", int, 3, (None, None), "x"), "a numeric option declares its range"),
        (("n", int, 3, (4, None), "x"), "default must be at least 4, got 3"),
        (("n", str, "a", (0, 1), "x"), "only a number has a range"),
        (("n", int, True, (0, 1), "x"), "default must be an integer, got true"),
        (("n", list, [], None, "x"), "type must be bool, int, float or str"),
        (("n", bool, True, None, ""), "say what it sets"),
    ],
)
def test_a_declaration_is_checked(args, message):
    with pytest.raises(ValueError, match=message):
        Option(*args)


def test_values_are_checked_and_typed():
    assert RATIO.problem(1) is None  # a TOML integer is a number
    assert RATIO.problem(2) == "must be from 0 to 1, got 2"
    assert Option("on", bool, True, None, "x").problem(1) == "must be true or false, got 1"
    value = RATIO.value({"max-ratio": 1})
    assert value == 1.0 and type(value) is float
    assert MIN_BATCH_SIZE.value({}) == 32 and MIN_BATCH_SIZE.value({"min-batch-size": 64}) == 64
    with pytest.raises(ValueError, match="`min-batch-size` must be an integer"):
        MIN_BATCH_SIZE.value({"min-batch-size": "64"})


def _rule(code: str, *options: Option) -> type[Rule]:
    return type(f"Rule{code}", (Rule,), {"code": code, "name": code.lower(), "options": options})


def test_a_rule_reads_its_options_typed():
    module = build(cst.parse_module("import torch\n"), "t.py", Settings({"min-batch-size": 48}))
    rule = _rule("TL998", MIN_BATCH_SIZE)()
    assert rule.option(module, MIN_BATCH_SIZE) == 48
    with pytest.raises(KeyError, match="TL998 reads `max-ratio` but does not declare it"):
        rule.option(module, RATIO)


def test_rules_share_one_declaration_of_a_name():
    same = Option("min-batch-size", int, 32, (2, 65536), MIN_BATCH_SIZE.doc)
    rules = {"TL001": _rule("TL001", MIN_BATCH_SIZE), "TL002": _rule("TL002", same)}
    assert options_of(rules) == {"min-batch-size": MIN_BATCH_SIZE}
    other = Option("min-batch-size", int, 16, (2, 65536), MIN_BATCH_SIZE.doc)
    rules["TL704"] = _rule("TL704", other)
    with pytest.raises(OptionCollision, match=r"declared differently by TL001 .* and TL704 "):
        options_of(rules)


def test_a_collision_stops_the_rules_being_found(tmp_path, monkeypatch):
    """A temporary rule set whose two rules declare `min-batch-size` differently."""
    folder = tmp_path / "rules"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for code, default in (("TL991", 32), ("TL992", 64)):
        (folder / f"{code.lower()}_r.py").write_text(
            textwrap.dedent(f"""\
                from torchlint.options import Option
                from torchlint.rule import Rule

                class R(Rule):
                    code = "{code}"
                    name = "r"
                    options = (Option("min-batch-size", int, {default}, (2, 99), "size"),)
                """)
        )
    package = ModuleType("temporary_rules")
    package.__path__ = [str(folder)]
    monkeypatch.setitem(sys.modules, "temporary_rules", package)
    monkeypatch.setattr(registry, "rules_package", lambda: package)
    try:
        with pytest.raises(OptionCollision, match=r"by TL991 .* and TL992 "):
            registry.builtin_rules.__wrapped__()
    finally:
        for name in [n for n in sys.modules if n.startswith("temporary_rules.")]:
            del sys.modules[name]


def test_settings_describe_each_option_with_its_effective_value():
    lines = describe([RATIO, MIN_BATCH_SIZE], {"min-batch-size": 64})
    assert lines == [
        "max-ratio = 0.5  # float from 0 to 1, default 0.5: a ratio",
        f"min-batch-size = 64  # int from 2 to 65536, default 32: {MIN_BATCH_SIZE.doc}",
    ]


def test_a_rule_doc_and_page_show_each_option_declared():
    one = f"`min-batch-size` (int, default `32`, from 2 to 65536): {MIN_BATCH_SIZE.doc}"
    two = f"`tiny-network-batch-size` (int, default `64`, from 2 to 65536): {TINY.doc}"
    for code, line in (("TL704", f"Options: {one}."), ("TL001", f"Options: {one}; {two}.")):
        rule = all_rules()[code]
        assert rule.doc().endswith(f"\n\n{line}")
        assert f"\n{line}\n" in rule_markdown(rule)
    assert "Options:" not in all_rules()["TL201"].doc()
