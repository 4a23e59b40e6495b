"""Configuration files, precedence and validation errors (exit 2, one clear line)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from torchlint.cli.check import plan as cli_plan
from torchlint.cli.flags import CheckOptions
from torchlint.config.load import Config, ConfigError, load_config
from torchlint.config.plan import Overrides, RunPlan, resolve
from torchlint.lint.registry import all_rules
from torchlint.options import toml_value
from torchlint.server.settings import Configs, EditorSettings, setup

from .conftest import LOADER, ROOT, run_cli


def write_project(root: Path, config: str, name: str = "pyproject.toml") -> None:
    (root / name).write_text(config)
    (root / "src").mkdir()
    (root / "src" / "train.py").write_text(LOADER)
    (root / "tests").mkdir()
    (root / "tests" / "test_train.py").write_text(LOADER)


def codes_by_file(result) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        if ": TL" in line:
            path, rest = line.split(":", 1)
            out.setdefault(path, []).append(rest.split()[1])
    return out


def test_pyproject_per_file_ignores(tmp_path):
    write_project(tmp_path, '[tool.torchlint]\nper-file-ignores = { "tests/*" = ["TL201"] }\n')
    result = run_cli("check", "--output-format", "concise", ".", cwd=tmp_path)
    assert codes_by_file(result) == {"src/train.py": ["TL201"]}


def test_config_found_from_subdirectory(tmp_path):
    write_project(tmp_path, '[tool.torchlint]\nignore = ["TL201"]\n')
    assert run_cli("check", ".", cwd=tmp_path / "src").returncode == 0


def test_torchlint_toml_and_extend_exclude(tmp_path):
    write_project(tmp_path, 'extend-exclude = ["tests"]\n', name="torchlint.toml")
    result = run_cli("check", "--output-format", "concise", ".", cwd=tmp_path)
    assert codes_by_file(result) == {"src/train.py": ["TL201"]}


def test_cli_select_overrides_config(tmp_path):
    write_project(tmp_path, '[tool.torchlint]\nselect = ["TL1"]\n')
    assert run_cli("check", ".", cwd=tmp_path).returncode == 0
    assert run_cli("check", "--select", "TL201", ".", cwd=tmp_path).returncode == 1
    assert run_cli("check", "--extend-select", "TL201", ".", cwd=tmp_path).returncode == 1


def test_unsafe_fixes_from_config(tmp_path):
    write_project(tmp_path, "[tool.torchlint]\nunsafe-fixes = true\n")
    assert run_cli("fix", "src", cwd=tmp_path).returncode == 0
    assert "NUM_WORKERS" in (tmp_path / "src" / "train.py").read_text()


def test_explicit_config_file(tmp_path):
    write_project(tmp_path, "")
    (tmp_path / "other.toml").write_text('ignore = ["TL2"]\n')
    assert run_cli("check", "--config", "other.toml", ".", cwd=tmp_path).returncode == 0


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("[tool.torchlint]\nselct = []\n", "unknown key `selct` (did you mean `select`?)"),
        ('[tool.torchlint]\nselect = ["TL777"]\n', "unknown rule selector 'TL777'"),
        ('[tool.torchlint]\nselect = "TL201"\n', "`select` must be a list of strings"),
        (
            '[tool.torchlint]\nper-file-ignores = { "a.py" = ["XX1"] }\n',
            "unknown rule selector 'XX1'",
        ),
        (
            '[tool.torchlint]\ntarget-torch = "two"\n',
            'target-torch must look like "2.4", got "two"',
        ),
        ("[tool.torchlint]\nunsafe-fixes = 1\n", "`unsafe-fixes` must be true or false"),
        (
            "[tool.torchlint]\nmin-batch-size = -5\n",
            "`min-batch-size` must be from 2 to 65536, got -5",
        ),
        (
            "[tool.torchlint]\nmin-batch-size = 1e9\n",
            "`min-batch-size` must be an integer, got 1000000000.0",
        ),
        (
            "[tool.torchlint]\nmin-batch-size = true\n",
            "`min-batch-size` must be an integer, got true",
        ),
        (
            '[tool.torchlint]\nmin-batch-size = "64"\n',
            '`min-batch-size` must be an integer, got "64"',
        ),
        ("[tool.torchlint\n", "invalid TOML"),
    ],
)
def test_config_errors(tmp_path, config, message):
    write_project(tmp_path, config)
    result = run_cli("check", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr
    assert "pyproject.toml" in result.stderr


def test_missing_config_file_and_bad_target(tmp_path):
    result = run_cli("check", "--config", "nope.toml", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert "--config 'nope.toml': no such config file, nor a TOML" in result.stderr
    result = run_cli("check", "--target-torch", "latest", ".", cwd=tmp_path)
    assert result.returncode == 2 and "--target-torch: target-torch must look like" in result.stderr


def test_values_are_spelled_as_toml_spells_them():
    assert [toml_value(v) for v in (True, False, "x", 2, 2.5, ["a", 1])] == [
        "true", "false", '"x"', "2", "2.5", '["a", 1]'
    ]  # fmt: skip
    assert toml_value({"a.py": ["TL201"]}) == '{ "a.py" = ["TL201"] }'


SELECTING = (
    '[tool.torchlint]\npreview = true\nselect = ["TL1"]\nextend-select = ["TL501"]\n'
    'ignore = ["TL102"]\n'
)


def test_command_line_select_replaces_select_and_extend_select(tmp_path):
    """ruff's layers: the command line's --select starts afresh (the file's select and
    extend-select go); its --extend-select and --ignore add to the file's."""
    (tmp_path / "pyproject.toml").write_text(SELECTING)
    config = load_config(tmp_path / "pyproject.toml")
    tl1 = [c for c in all_rules() if c.startswith("TL1")]
    assert config.selected_codes() == sorted({*tl1, "TL501"} - {"TL102"})
    assert config.selecting(["TL2"]).selected_codes() == [c for c in all_rules() if c[:3] == "TL2"]
    assert config.selecting(None, ["TL201"]).selected_codes() == sorted(
        {*tl1, "TL501", "TL201"} - {"TL102"}
    )
    assert config.selecting(["TL1"], ["TL201"], ["TL101"]).selected_codes() == sorted(
        {*tl1, "TL201"} - {"TL101", "TL102"}
    )  # the file's ignore still holds
    assert config.select == ["TL1"]  # the file's configuration itself is left as it was
    assert Config(root=tmp_path, preview=True).selecting(None).selected_codes() == sorted(
        c for c, r in all_rules().items() if r.default_enabled
    )


def test_show_settings_shows_the_effective_rules(tmp_path):
    (tmp_path / "pyproject.toml").write_text(SELECTING)
    (tmp_path / "train.py").write_text(LOADER)
    result = run_cli("check", "--show-settings", "--select", "TL20", ".", cwd=tmp_path)
    assert result.returncode == 0
    rules = [line for line in result.stdout.splitlines() if line.startswith("rules = ")]
    codes = [c for c in all_rules() if c.startswith("TL20")]
    assert rules == ["rules = [" + ", ".join(f'"{c}"' for c in codes) + "]"]
    assert "force-exclude = false" in result.stdout  # TOML's spelling
    options = [line for line in result.stdout.splitlines() if line.startswith("min-batch-size")]
    assert options == [
        "min-batch-size = 32  # int from 2 to 65536, default 32: the batch size below which a "
        "training batch is small, and what a fix raises it to"
    ]
    found = run_cli("check", "--output-format", "concise", "--select", "TL20", ".", cwd=tmp_path)
    assert {line.split()[1] for line in found.stdout.splitlines() if ": TL" in line} <= set(codes)


PREVIEW_RULE = '''
"""X300 probe: a rule found wrong on real code, kept in preview."""

from torchlint import Rule


class Probe(Rule):
    code = "X300"
    name = "probe"
    preview = True
    tokens = ("torch",)

    def check(self, module):
        return iter(())
'''


def test_preview_rules_run_only_in_preview_mode(tmp_path):
    """As ruff's preview: a rule found wrong on real code, or new and not yet judged
    (docs/precision.md names each), is left out of every selection (`ALL`, a prefix, its
    own code) until preview mode is on; naming its code without it is said on stderr."""
    built_in = {c for c, r in all_rules().items() if r.preview}
    precision = (ROOT / "docs" / "precision.md").read_text(encoding="utf-8")
    assert all(f"| {c} |" in precision for c in built_in)
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "probe.py").write_text(PREVIEW_RULE)
    local = '[tool.torchlint]\nlocal-rules = ["rules"]\n'
    (tmp_path / "pyproject.toml").write_text(local)
    config = load_config(tmp_path / "pyproject.toml")
    assert config.rules["X300"].preview
    every = config.selecting(["ALL"])
    assert "X300" not in every.selected_codes() and "TL301" in every.selected_codes()
    assert not built_in & set(every.selected_codes())
    assert "X300" in dataclasses.replace(every, preview=True).selected_codes()
    named = config.selecting(["X300", "TL2"], ignore=["TL202"])
    assert named.preview_left_out() == ["X300"]
    (tmp_path / "pyproject.toml").write_text(local + 'select = ["X300", "TL302"]\n')
    (tmp_path / "train.py").write_text("import torch\n")
    said = run_cli("check", "train.py", cwd=tmp_path)
    assert said.returncode == 0
    assert "X300 is a preview rule: it runs only with `--preview`" in said.stderr
    assert "TL302 is a preview rule" not in said.stderr
    settings = run_cli("check", "--preview", "--show-settings", "train.py", cwd=tmp_path)
    assert 'rules = ["TL302", "X300"]' in settings.stdout and "preview = true" in settings.stdout
    (tmp_path / "pyproject.toml").write_text(local + "preview = true\n")
    on = run_cli("check", "--show-settings", "train.py", cwd=tmp_path).stdout
    assert '"X300"' in on and "preview = true" in on
    off = run_cli("check", "--no-preview", "--show-settings", "train.py", cwd=tmp_path).stdout
    assert '"X300"' not in off and "preview = false" in off


def test_min_impact_is_high_or_low(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nmin-impact = "medium"\n')
    with pytest.raises(ConfigError, match='`min-impact` must be "high" or "low"'):
        load_config(tmp_path / "pyproject.toml")
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nmin-impact = "low"\n')
    assert load_config(tmp_path / "pyproject.toml").low_impact
    assert not Config(root=tmp_path).low_impact


def test_overrides_layer_on_the_config_as_ruffs_command_line(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torchlint]\nfixable = ["TL2"]\nunfixable = ["TL203"]\nexclude = ["gen"]\n'
        'extend-exclude = ["old"]\ntarget-torch = "2.1"\n'
    )
    config = load_config(tmp_path / "pyproject.toml")
    before = dataclasses.replace(config, exclude=list(config.exclude))
    plan = resolve(config, Overrides())
    assert plan.unfixable == frozenset(all_rules()) - (
        {c for c in all_rules() if c[:3] == "TL2"} - {"TL203"}
    )
    assert not plan.unsafe and not plan.low_impact and plan.settings.target_torch == (2, 1)
    plan = resolve(
        config,
        Overrides(
            fixable=("TL201",),
            extend_fixable=("TL205",),
            unfixable=("TL205",),
            exclude=(),
            extend_exclude=("new",),
            unsafe_fixes=True,
            preview=True,
            min_impact="low",
            target_torch=(2, 4),
            target_torch_source="--target-torch",
        ),
    )
    assert plan.unfixable == frozenset(all_rules()) - {"TL201"}
    assert plan.config.exclude == [] and plan.config.extend_exclude == ["old", "new"]
    assert plan.unsafe and plan.low_impact and plan.config.preview
    assert plan.settings.target_torch == (2, 4)
    assert plan.config.target_torch_source == "--target-torch"
    assert config == before  # the discovered config (an editor keeps it) is left as it was


@pytest.mark.parametrize(
    "config",
    [
        None,
        '[tool.torchlint]\npreview = true\nselect = ["TL3", "TL2"]\nignore = ["TL302"]\n',
        '[tool.torchlint]\nmin-impact = "low"\nunsafe-fixes = true\nmin-batch-size = 8\n',
        '[tool.torchlint]\nextend-select = ["TL501"]\nunfixable = ["TL201"]\n'
        'per-file-ignores = { "src/*" = ["TL202"] }\ntarget-torch = "1.13"\n',
    ],
)
@pytest.mark.parametrize("editor", [{}, {"select": ["TL2"], "extendSelect": ["TL301"]}])
def test_the_editor_gets_the_plan_the_command_line_gets(tmp_path, monkeypatch, config, editor):
    """One config and the same overrides give the language server exactly the rules and
    settings `torchlint check` runs with."""
    monkeypatch.chdir(tmp_path)  # without a config file, both are rooted at the cwd
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(LOADER)
    if config is not None:
        (tmp_path / "pyproject.toml").write_text(config)
    (tmp_path / "requirements.txt").write_text("torch>=2.0\n")
    path = tmp_path / "src" / "train.py"
    options = CheckOptions(
        paths=[str(path)], select=editor.get("select"), extend_select=editor.get("extendSelect")
    )
    command_line = cli_plan(options).for_file(path)
    server = setup(Configs(), EditorSettings.parse(editor), path, tmp_path)
    assert server == command_line
    assert command_line.settings.target_torch == (
        (1, 13) if config and "1.13" in config else (2, 0)
    )
    if config and "preview" in config:
        assert "TL301" in command_line.codes and "TL302" not in command_line.codes
    if config and "min-impact" in config:
        assert command_line.low_impact and command_line.unsafe
        assert command_line.settings.options["min-batch-size"] == 8
    if config and "per-file-ignores" in config:
        assert "TL202" not in command_line.codes and "TL201" in command_line.unfixable


# -- the command line's --per-file-ignores, --config KEY = VALUE and --isolated ----------


def plan_of(root: Path, **options) -> RunPlan:
    """The run plan of `torchlint check` in `root` with these options (parsed)."""
    return cli_plan(CheckOptions(paths=[str(root)], **options))


PER_FILE = (
    '[tool.torchlint]\nper-file-ignores = { "tests/*" = ["TL201"] }\n'
    'extend-per-file-ignores = { "src/*" = ["TL202"] }\n'
)


def test_per_file_ignores_on_the_command_line_replace_or_extend(tmp_path):
    """As ruff's: --per-file-ignores replaces the config's `per-file-ignores` (not its
    `extend-per-file-ignores`), --extend-per-file-ignores adds; each value is
    PATTERN:CODES, and a comma may start the next pair."""
    write_project(tmp_path, PER_FILE)
    train, test = tmp_path / "src" / "train.py", tmp_path / "tests" / "test_train.py"
    plan = plan_of(tmp_path)
    assert "TL201" not in plan.for_file(test).codes and "TL202" not in plan.for_file(train).codes
    plan = plan_of(tmp_path, per_file_ignores=["src/*:TL4, TL5", "a.py:TL3,b/*.py:TL6"])
    assert plan.config.per_file_ignores == {"src/*": ["TL4", "TL5"], "a.py": ["TL3"],
                                            "b/*.py": ["TL6"]}  # fmt: skip
    assert plan.config.extend_per_file_ignores == {"src/*": ["TL202"]}
    assert "TL201" in plan.for_file(test).codes  # the file's per-file-ignores are replaced
    assert not {"TL202", "TL401", "TL501"} & set(plan.for_file(train).codes)
    plan = plan_of(tmp_path, extend_per_file_ignores=["tests/*:TL202", "tests/*:TL203"])
    assert plan.config.per_file_ignores == {"tests/*": ["TL201"]}
    assert plan.config.extend_per_file_ignores == {"src/*": ["TL202"],
                                                   "tests/*": ["TL202", "TL203"]}  # fmt: skip
    assert not {"TL201", "TL202", "TL203"} & set(plan.for_file(test).codes)
    assert load_config(tmp_path / "pyproject.toml").per_file_ignores == {"tests/*": ["TL201"]}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["TL201"], "--per-file-ignores 'TL201': expected PATTERN:CODES"),
        ([""], "--per-file-ignores '': expected PATTERN:CODES"),
        ([":TL201"], "--per-file-ignores ':TL201': expected PATTERN:CODES"),
        (["tests/*:"], "--per-file-ignores 'tests/*:': expected PATTERN:CODES"),
        (["a.py:TL201", "TL202"], "--per-file-ignores 'TL202': expected PATTERN:CODES"),
        (["a.py:TL9999"], "unknown rule selector 'TL9999'"),
    ],
)
def test_a_bad_per_file_ignore_is_a_config_error(tmp_path, values, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        plan_of(tmp_path, per_file_ignores=values)


def test_config_settings_layer_over_the_file_and_under_the_options(tmp_path, monkeypatch):
    """`--config KEY = VALUE`, in any order with the file it names: over the file's
    settings (`select` afresh, as --select; the file's `ignore` kept), under the options
    (--select); the config file itself is left as it was."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "other.toml").write_text(
        'select = ["TL1"]\nextend-select = ["TL501"]\nignore = ["TL102"]\nmin-batch-size = 8\n'
        'per-file-ignores = { "gen/*" = ["TL1"] }\n'
    )
    settings = ['select = ["TL1", "TL2"]', "min-batch-size = 64", "min-batch-size = 128"]
    plan = plan_of(tmp_path, config=[settings[0], "other.toml", *settings[1:]])
    chosen = {c for c, r in all_rules().items() if c[:3] in ("TL1", "TL2") and not r.preview}
    expected = chosen - {"TL102"}
    assert set(plan.codes) == expected  # not TL501: `select` starts afresh
    assert plan.settings.options["min-batch-size"] == 128  # the last one wins
    assert plan.config.per_file_ignores == {"gen/*": ["TL1"]}
    plan = plan_of(tmp_path, config=["other.toml", 'per-file-ignores = { "a.py" = ["TL2"] }'])
    assert plan.config.per_file_ignores == {"a.py": ["TL2"]}  # replaced, as ruff's
    plan = plan_of(tmp_path, config=["other.toml", 'select = ["TL2"]'], select=["TL201"])
    assert plan.codes == ("TL201",)
    plan = plan_of(tmp_path, config=['target-torch = "2.4"'])
    assert plan.settings.target_torch == (2, 4)
    assert plan.config.target_torch_source == "--config 'target-torch = \"2.4\"'"
    assert load_config(tmp_path / "other.toml").options["min-batch-size"] == 8


def test_a_config_setting_of_the_semantic_table_keeps_its_other_keys(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torchlint.semantic]\nstep-functions = ["lib.step"]\nmodel-factories = ["lib.m"]\n'
    )
    plan = plan_of(tmp_path, config=['semantic.model-factories = ["lib.other"]'])
    knowledge = plan.settings.knowledge
    assert knowledge.model_factories == ("lib.other",)
    assert [s.name for s in knowledge.step_functions] == ["lib.step"]


@pytest.mark.parametrize(
    "setting",
    [
        "selct = []",
        'select = ["TL777"]',
        'select = "TL201"',
        'per-file-ignores = { "a.py" = ["XX1"] }',
        "unsafe-fixes = 1",
        "min-batch-size = -5",
        "min-batch-size = 1e9",
        'min-batch-size = "64"',
        'target-torch = "two"',
        "target-torch = 2.10",
        'min-impact = "medium"',
        'semantic.step-function = ["lib.step"]',
    ],
)
def test_a_bad_config_setting_says_what_the_file_would(tmp_path, setting):
    """Checked as the config file's keys are: the same message, naming the option."""
    (tmp_path / "pyproject.toml").write_text(f"[tool.torchlint]\n{setting}\n")
    with pytest.raises(ConfigError) as in_file:
        load_config(tmp_path / "pyproject.toml")
    with pytest.raises(ConfigError) as given:
        plan_of(tmp_path, config=[setting], isolated=True)
    where = f"--config {setting!r}: "
    assert str(given.value).startswith(where)
    assert str(given.value).removeprefix(where) == str(in_file.value).split(": ", 1)[1]


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("nope.toml", "--config 'nope.toml': no such config file, nor a TOML `KEY = VALUE` pair"),
        ("select = [TL201]", "--config 'select = [TL201]': invalid TOML: "),
        ("min-batch-size =", "--config 'min-batch-size =': invalid TOML: "),
        ("", "--config '': sets nothing"),
        ('local-rules = ["rules"]', "`local-rules` is read from a config file only"),
    ],
)
def test_a_config_value_neither_file_nor_setting_is_a_config_error(tmp_path, setting, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        plan_of(tmp_path, config=[setting])


def test_isolated_reads_no_config_file_nor_metadata(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_project(tmp_path, '[tool.torchlint]\nignore = ["TL201"]\nmin-batch-size = 8\n')
    (tmp_path / "requirements.txt").write_text("torch>=2.0\n")
    found = plan_of(tmp_path)
    assert found.config.source is not None and found.settings.target_torch == (2, 0)
    isolated = plan_of(tmp_path, isolated=True, config=["min-batch-size = 16"])
    assert isolated.config.source is None and isolated.settings.target_torch is None
    assert "TL201" in isolated.codes and isolated.settings.options["min-batch-size"] == 16
    refused = "--config pyproject.toml cannot be used with --isolated"
    with pytest.raises(ConfigError, match=re.escape(refused)):
        plan_of(tmp_path, isolated=True, config=["pyproject.toml"])
    (tmp_path / "other.toml").write_text("")
    with pytest.raises(ConfigError, match="one configuration file at most"):
        plan_of(tmp_path, config=["pyproject.toml", "other.toml"])
