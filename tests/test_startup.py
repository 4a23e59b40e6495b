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


def test_a_rule_the_catalog_does_not_list_yet_runs(tmp_path, monkeypatch):
    """The catalog is a cache of rules/: a module it does not list (a rule just added,
    before `python -m torchlint.docs`) is imported and its rule found; an entry whose
    module is gone is left out; a listed module present stays a stand-in, not imported."""
    import importlib
    import sys

    from torchlint.lint import registry

    package = tmp_path / "fresh_rules"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tl201_dataloader_sync_loading.py").write_text("raise ImportError('not now')\n")
    (package / "tl950_new_rule.py").write_text(
        "from torchlint.rule import Rule\n\n"
        "class NewRule(Rule):\n    code = 'TL950'\n    name = 'new-rule'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "rules_package", lambda: importlib.import_module("fresh_rules"))
    try:
        rules = registry._shipped()
    finally:
        for name in [m for m in sys.modules if m.startswith("fresh_rules")]:
            del sys.modules[name]
    assert sorted(rules) == ["TL201", "TL950"]
    assert rules["TL950"].__name__ == "NewRule"
    assert isinstance(rules["TL201"], registry._Deferred)
