"""Start-up stays lean: what a pre-commit hook pays on every commit."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .conftest import ROOT

PROBE = """
import sys
from torchlint.cli import main
sys.argv = ["torchlint", *{args!r}]
try:
    main()
except SystemExit:
    pass
print("HEAVY:" + ",".join(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


def _imported(*args: str, heavy=("libcst", "torch", "rich", "numpy"), cwd=None, env=None) -> str:
    code = PROBE.format(args=list(args), heavy=list(heavy))
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1].removeprefix("HEAVY:")


def test_version_imports_nothing_heavy():
    assert _imported("--version") == ""


@pytest.mark.slow
def test_check_never_imports_torch_or_rich(tmp_path):
    (tmp_path / "t.py").write_text(
        "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds)\n"
    )
    assert _imported("check", "--no-cache", "t.py", cwd=tmp_path) == "libcst"


def test_run_answered_from_the_cache_imports_no_rule_nor_libcst(tmp_path):
    """Nothing changed since the last run: no rule module, no libcst, no semantic model
    (the configuration reads the registry's catalog of the built-in rules)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(
        "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds)\n"
    )
    (project / "util.py").write_text("def helper():\n    return 1\n")
    env = {"TORCHLINT_CACHE_DIR": str(tmp_path / "cache")}
    heavy = ("libcst", "torchlint.semantic", "torchlint.lint.linter", "pathspec")
    heavy += ("torchlint.rules.tl201_dataloader_sync_loading",)
    args = ("check", "--select", "ALL", "--preview", ".")
    assert _imported(*args, heavy=heavy, cwd=project, env=env) != ""  # cold: it lints
    assert _imported(*args, heavy=heavy, cwd=project, env=env) == ""


def test_files_no_rule_reads_are_checked_without_libcst(tmp_path):
    """A file that holds no selected rule's token (the catalog says which) is checked for
    its syntax only, by CPython's parser: neither the rules nor libcst are imported, in a
    project too; a syntax error is still reported (libcst, which reads syntax newer than
    this Python's, is asked then)."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "util.py").write_text("import torch\n\ndef helper(x):\n    return x + 1\n")
    (tmp_path / "other.py").write_text("from util import helper\n\nprint(helper(1))\n")
    heavy = ("libcst", "torchlint.lint.linter", "torchlint.rules.tl201_dataloader_sync_loading")
    for args in (("util.py",), ("util.py", "other.py"), (".",)):
        assert _imported("check", "--no-cache", *args, heavy=heavy, cwd=tmp_path) == "", args
    (tmp_path / "broken.py").write_text("def f(:\n")
    broken = subprocess.run(
        [sys.executable, "-m", "torchlint", "check", "--no-cache", "broken.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert broken.returncode == 2 and "broken.py:1:7: TL000 SyntaxError" in broken.stdout


def test_catalog_is_the_rules():
    """The registry's catalog says of each built-in rule what the rule itself says."""
    from torchlint.lint.registry import all_rules, builtin_rules, loaded

    catalog, rules = all_rules(), builtin_rules()
    assert list(catalog) == list(rules), "a rule is missing from (or extra in) CATALOG"
    for code, rule in rules.items():
        entry = catalog[code]
        said = (entry.name, entry.default_enabled, entry.preview, entry.options, entry.tokens)
        assert said == (rule.name, rule.default_enabled, rule.preview, rule.options, rule.tokens)
        assert (entry.pattern and entry.pattern.pattern) == (rule.pattern and rule.pattern.pattern)
        assert loaded(entry) is rule
        assert entry.fix_safety is rule.fix_safety and entry.summary() == rule.summary()


@pytest.fixture
def copied_rules(tmp_path, monkeypatch):
    """A copy of rules/ as the built-in rules (a package of another name) with a rule
    added (TL950), one edited (TL402: other tokens) and one removed (TL306), none of it
    in the catalog; the registry's caches are emptied before and after."""
    import importlib
    import shutil

    from torchlint.lint import registry

    package = tmp_path / "copied_rules"
    shutil.copytree(ROOT / "rules", package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "tl950_new_rule.py").write_text(
        '"""TL950 new-rule: a rule added after the catalog was generated."""\n\n'
        "from torchlint.rule import Rule\n\n"
        "class NewRule(Rule):\n    code = 'TL950'\n    name = 'new-rule'\n"
    )
    edited = package / "tl402_empty_cache_in_loop.py"
    text = edited.read_text()
    assert 'tokens = ("empty_cache",)' in text
    edited.write_text(text.replace('tokens = ("empty_cache",)', 'tokens = ("empty_cache", "gc")'))
    (package / "tl306_ddp_find_unused_parameters.py").unlink()
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "rules_package", lambda: importlib.import_module("copied_rules"))
    cached = (registry.all_rules, registry.builtin_rules, registry._builtin, registry._with_local)
    for function in cached:
        function.cache_clear()
    yield "copied_rules"
    for name in [m for m in sys.modules if m.split(".")[0] == "copied_rules"]:
        del sys.modules[name]
    for function in cached:
        function.cache_clear()


def test_the_catalog_is_a_cache_of_the_rules_folder(copied_rules):
    """A module of rules/ the catalog does not list (a rule just added, before `python -m
    torchlint.docs`), or whose text is not the one it was generated from (a rule edited
    since), is imported and its rule found as written; an entry whose module is gone is
    left out; a listed module unchanged stays a stand-in, not imported."""
    from torchlint.lint import registry

    rules = registry._shipped()
    assert "TL950" in rules and "TL306" not in rules
    assert rules["TL950"].__name__ == "NewRule"
    assert rules["TL402"].tokens == ("empty_cache", "gc")
    assert not isinstance(rules["TL402"], registry._Deferred)
    assert isinstance(rules["TL201"], registry._Deferred)
    assert f"{copied_rules}.tl201_dataloader_sync_loading" not in sys.modules


def test_a_rule_added_to_rules_is_listed_without_a_generator_step(copied_rules, tmp_path):
    """`torchlint rules` lists a rule dropped into rules/ and one edited there as they are
    written, the catalog untouched."""
    import json

    from .conftest import run_cli

    result = run_cli("rules", "--output-format", "json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = {row["code"]: row for row in json.loads(result.stdout)}
    assert rows["TL950"]["name"] == "new-rule" and rows["TL950"]["origin"] == "built-in"
    assert rows["TL950"]["summary"] == "a rule added after the catalog was generated."
    assert "TL306" not in rows and "TL402" in rows
