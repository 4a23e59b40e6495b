"""Local rules (`local-rules`), the public API, the testing helper and trust in the
language server. docs/extending.md's own snippets, and a plugin installed into a virtual
environment, are tests/test_extending.py's."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torchlint.config.load import ConfigError, expand, load_config
from torchlint.server.settings import Configs, EditorSettings

from .conftest import ROOT, plan_of, run_cli

RULE = '''
"""X100 no-save-in-step: `torch.save` on every training step."""

from torchlint import Diagnostic, Option, Rule


EVERY = Option("x-every", int, 1, (1, 100), "steps between saves")


class NoSave(Rule):
    code = "X100"
    name = "no-save"
    tokens = ("save",)
    options = (EVERY,)

    def check(self, module):
        every = self.option(module, EVERY)
        for call in module.calls_to("torch.save"):
            yield self.diagnostic(call.node, f"torch.save (every {every})")
'''
SCRIPT = "import torch\n\ntorch.save(model, 'm.pt')\n"


def local_project(tmp_path: Path, config: str = "", **modules: str) -> Path:
    """A project whose pyproject names tools/lint_rules, holding `modules` (by file stem;
    the X100 rule above by default) and a.py (one X100 finding on line 3)."""
    folder = tmp_path / "tools" / "lint_rules"
    folder.mkdir(parents=True)
    for stem, text in (modules or {"no_save": RULE}).items():
        (folder / f"{stem}.py").write_text(textwrap.dedent(text))
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.torchlint]\nlocal-rules = ["tools/lint_rules"]\n{config}'
    )
    (tmp_path / "a.py").write_text(SCRIPT)
    return tmp_path


def codes(tmp_path: Path, *args: str) -> list[str]:
    result = run_cli("check", "--no-cache", "--output-format", "concise", *args, cwd=tmp_path)
    return [line.split()[1] for line in result.stdout.splitlines() if line.startswith("a.py:")]


def test_a_local_rule_is_treated_as_a_built_in_one(tmp_path):
    root = local_project(
        tmp_path, 'x-every = 5\n[tool.torchlint.per-file-ignores]\n"b.py" = ["X1"]\n'
    )
    result = run_cli("check", "--no-cache", "--output-format", "concise", ".", cwd=root)
    assert "a.py:3:1: X100 torch.save (every 5)" in result.stdout
    assert result.returncode == 1
    assert codes(root, "--ignore", "X100") == []
    assert codes(root, "--select", "X") == ["X100"]
    assert codes(root, "--select", "ALL") == ["X100"]
    (root / "b.py").write_text(SCRIPT)
    (root / "c.py").write_text(SCRIPT.replace("'m.pt')", "'m.pt')  # noqa: X100"))
    result = run_cli("check", "--no-cache", "--output-format", "concise", ".", cwd=root)
    assert "b.py" not in result.stdout and "c.py" not in result.stdout
    doc = run_cli("rule", "X100", cwd=root).stdout
    assert doc.startswith("X100 no-save-in-step") and "Origin: local tools/lint_rules." in doc
    assert "x-every" in doc


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("def broken(:\n", "no_save.py:1: invalid syntax"),
        ("import no_such_module_here\n", "no_save.py: cannot be imported: ModuleNotFoundError"),
        ("from torchlint import Rule\nclass R(Rule):\n    name = 'r'\n", "needs a `code`"),
        ("from torchlint import Rule\nclass R(Rule):\n    code = 'TL999'\n    name = 'r'\n", "TL"),
        ("from torchlint import Rule\nclass R(Rule):\n    code = 'X1'\n", "X1 needs a `name`"),
    ],
)
def test_a_malformed_rule_module_is_a_config_error_naming_it(tmp_path, text, said):
    root = local_project(tmp_path, no_save=text)
    result = run_cli("check", "--no-cache", ".", cwd=root)
    assert result.returncode == 2
    assert said in result.stderr and str(root / "tools" / "lint_rules") in result.stderr
    assert "Traceback" not in result.stderr


def test_a_code_taken_twice_or_a_missing_folder_is_a_config_error(tmp_path):
    root = local_project(tmp_path / "twice", no_save=RULE, again=RULE.replace("NoSave", "Again"))
    with pytest.raises(
        ConfigError, match=r"no_save\.py: rule X100 is already defined by .*again\.py"
    ):
        load_config(root / "pyproject.toml")
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "pyproject.toml").write_text('[tool.torchlint]\nlocal-rules = ["gone"]\n')
    with pytest.raises(ConfigError, match=r"gone: local rules folder not found"):
        load_config(tmp_path / "none" / "pyproject.toml")
    (tmp_path / "none" / "pyproject.toml").write_text('[tool.torchlint]\nlocal-rules = "x"\n')
    with pytest.raises(ConfigError, match=r"`local-rules` must be a list of folders"):
        load_config(tmp_path / "none" / "pyproject.toml")


def test_selectors_take_any_prefix_of_letters_then_digits():
    rules = ["TL201", "TL202", "X100", "X200", "XY1"]
    assert expand(["X"], rules) == ["X100", "X200"]
    assert expand(["X1"], rules) == ["X100"]
    assert expand(["xy"], rules) == ["XY1"]
    assert expand(["ALL"], rules) == rules
    for unknown in ("T", "X3", "TL2-", "Z"):
        with pytest.raises(ConfigError, match="unknown rule selector"):
            expand([unknown], rules)
    assert expand(["Z9"], rules, unchecked=True) == []
    with pytest.raises(ConfigError):
        expand(["TL999"], rules, unchecked=True)  # a built-in's prefix is always checked


def test_an_untrusted_config_skips_its_local_rules(tmp_path):
    root = local_project(tmp_path, 'select = ["TL", "X100"]\nx-every = 5\n')
    config = load_config(root / "pyproject.toml", trusted=False)
    assert config.skipped_local == (root / "tools" / "lint_rules",)
    assert "X100" not in config.selected_codes() and "TL201" in config.selected_codes()
    assert "X100" in load_config(root / "pyproject.toml").selected_codes()


def test_a_raising_local_rule_is_named_and_the_others_still_report(tmp_path):
    raising = RULE.replace("X100", "X200").replace(
        "yield self", "raise KeyError('k')\n            yield self"
    )
    root = local_project(tmp_path, no_save=RULE, raising=raising)
    result = run_cli("check", "--no-cache", "--output-format", "concise", ".", cwd=root)
    assert result.returncode == 2
    assert "a.py:3:1: X100" in result.stdout
    module = root / "tools" / "lint_rules" / "raising.py"
    assert f"a.py: rule X200 ({module}) raised KeyError: 'k'" in result.stderr


@pytest.mark.slow  # starts worker processes the way macOS and Windows do
def test_spawned_worker_processes_load_the_local_rules(tmp_path, monkeypatch):
    from torchlint.run import pool
    from torchlint.run.files import run

    root = local_project(tmp_path)
    for i in range(4):
        (root / f"s{i}.py").write_text(SCRIPT)
    config = load_config(root / "pyproject.toml")
    plan = plan_of(config, ("X100",))
    files = sorted(root.glob("*.py"))
    monkeypatch.setenv(pool.WORKERS_ENV, "2")
    monkeypatch.setattr(pool, "MIN_POOL_BYTES", 0)
    monkeypatch.setattr(pool, "START_METHOD", "spawn")
    results = run(plan, files, on_result=lambda r: None).results
    assert [(r.error, [v.code for v in r.violations]) for r in results] == [(None, ["X100"])] * 5


def test_the_cache_key_holds_the_local_rules_sources(tmp_path):
    from torchlint.run.cache import code_fingerprint

    root = local_project(tmp_path)
    load_config(root / "pyproject.toml")
    before = code_fingerprint()
    (root / "tools" / "lint_rules" / "no_save.py").write_text(RULE + "\n# changed\n")
    assert code_fingerprint() != before


def test_the_public_api_is_at_the_top_level_and_import_stays_cheap():
    probe = (
        "import sys, torchlint\n"
        "assert 'libcst' not in sys.modules\n"
        "assert torchlint.API_VERSION == 2\n"
        "from torchlint import Rule, Diagnostic, TorchModule, FixSafety, Fix, Replace\n"
        "assert all(getattr(torchlint, n) is not None for n in torchlint.__all__)\n"
        "try:\n    torchlint.nothing\nexcept AttributeError as e:\n    print(e)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "module 'torchlint' has no attribute 'nothing'\n"


def test_a_plugin_imports_what_the_built_in_rules_import():
    """`torchlint.api` holds every name a built-in rule imports of torchlint (the rule API,
    the facts through `torchlint.semantic`, the edits fixes use), the same objects: a plugin
    can do what a built-in rule does. Only TL904's own code stays inside."""
    from torchlint import api

    imported = {
        (node.module, alias.name)
        for path in (ROOT / "rules").glob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torchlint")
        for alias in node.names
    }
    assert {m for m, _ in imported} >= {"torchlint.semantic", "torchlint.edits", "torchlint.rule"}
    missing = sorted(name for _, name in imported if name not in api.__all__)
    assert missing == ["UNUSED_NOQA"]
    for module, name in imported - {("torchlint.results", "UNUSED_NOQA")}:
        assert getattr(api, name) is getattr(importlib.import_module(module), name), name


def test_check_fixtures_says_which_file_and_lines(tmp_path):
    from torchlint.testing import check_fixtures, load_rules

    rule = load_rules(local_project(tmp_path) / "tools" / "lint_rules")["X100"]
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    (fixtures / "bad.py").write_text(SCRIPT.replace("'m.pt')", "'m.pt')  # error: X100"))
    (fixtures / "good.py").write_text("import torch\n")
    check_fixtures(rule, fixtures)
    (fixtures / "bad.py").write_text(SCRIPT + "x = 1  # error: X100\n")
    with pytest.raises(
        AssertionError, match=r"bad\.py: .*not flagged: line 4 .*not marked: line 3"
    ):
        check_fixtures(rule, fixtures)
    (fixtures / "bad.py").unlink()
    (fixtures / "good.py").write_text(SCRIPT)
    with pytest.raises(AssertionError, match=r"good\.py: nothing may be flagged, found line 3"):
        check_fixtures(rule, fixtures)


def test_the_editor_trusts_local_rules_only_when_told(tmp_path):
    root = local_project(tmp_path)
    assert EditorSettings.parse({"trustLocalRules": True}).trust_local_rules
    assert not EditorSettings.parse({}).trust_local_rules
    with pytest.raises(ConfigError, match="must be true or false"):
        EditorSettings.parse({"trustLocalRules": "yes"})
    configs = Configs()
    assert configs.config(root, root).skipped_local
    configs.trust(True)
    config = configs.config(root, root)
    assert not config.skipped_local and "X100" in config.rules


def test_the_server_logs_the_local_rules_it_skipped(tmp_path, monkeypatch):
    from torchlint.config.plan import Overrides, resolve
    from torchlint.server.lsp import TorchlintServer

    root = local_project(tmp_path)
    server = TorchlintServer(cache=False)
    logged: list[str] = []
    monkeypatch.setattr(server, "log", lambda message, kind=None: logged.append(message))
    plan = resolve(load_config(root / "pyproject.toml", trusted=False), Overrides())
    server.skipped(plan)
    server.skipped(plan)
    (message,) = logged
    assert "local rules not run, the workspace is not trusted" in message
    assert (
        "trustLocalRules" in message
        and str(root / "tools" / "lint_rules" / "no_save.py") in message
    )
    server.skipped(resolve(load_config(root / "pyproject.toml"), Overrides()))
    assert len(logged) == 1


def test_plugins_are_found_through_their_entry_points(tmp_path, monkeypatch):
    from importlib.metadata import EntryPoint

    from torchlint.lint import registry

    (tmp_path / "acme_plugin_rules.py").write_text(RULE.replace("X100", "ACME7"))
    monkeypatch.syspath_prepend(str(tmp_path))
    found = EntryPoint("acme", "acme_plugin_rules", registry.ENTRY_POINTS)
    monkeypatch.setattr(registry, "entry_points", lambda group: [found])
    rules = registry.all_rules.__wrapped__()
    assert rules["ACME7"].origin == "plugin acme" and "TL201" in rules
    broken = EntryPoint("acme", "no_such_plugin_module", registry.ENTRY_POINTS)
    monkeypatch.setattr(registry, "entry_points", lambda group: [broken])
    said = r"plugin acme: entry point `no_such_plugin_module` cannot be imported: ModuleNotF"
    with pytest.raises(registry.RuleLoadError, match=said):
        registry.all_rules.__wrapped__()
