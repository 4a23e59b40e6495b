"""What a run would do, shown instead of doing it: `--show-files`, `--show-settings`, and
the settings `--verbose` prints first."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchlint.cli.app import EXIT_CLEAN, EXIT_ERROR, error, note
from torchlint.cli.flags import CheckOptions

if TYPE_CHECKING:
    from torchlint.config.load import Config
    from torchlint.config.plan import RunPlan


def show(options: CheckOptions, plan: RunPlan, paths: list[str], force_exclude: bool) -> int:
    """`--show-files` (every file a run would check) or `--show-settings` (the settings
    for the first of them)."""
    from torchlint.run.runner import discover, display

    found = discover(paths, plan.config, force_exclude=force_exclude)
    for r in found.errors:
        error(f"{r.path}: {r.error}")
    files = sorted(found.files, key=lambda p: display(p))
    if options.show_files:
        sys.stdout.write("".join(display(p) + "\n" for p in files))
        return EXIT_ERROR if found.errors else EXIT_CLEAN
    if not files:
        error("no Python files found under the given paths")
        return EXIT_ERROR
    sys.stdout.write(_settings_text(plan, files[0]))
    return EXIT_ERROR if found.errors else EXIT_CLEAN


def _settings_text(plan: RunPlan, path: Path) -> str:
    """The resolved settings for `path`, as TOML keys."""
    from torchlint.config.knowledge import written
    from torchlint.config.load import declared_options
    from torchlint.options import describe, toml_value
    from torchlint.run.runner import display

    config = plan.config
    rows: dict[str, Any] = {
        "rules": list(plan.for_file(path).codes),
        "unsafe-fixes": plan.unsafe,
        "preview": config.preview,
        "min-impact": config.min_impact,
        "unfixable": sorted(plan.unfixable & set(plan.codes)),
        "target-torch": ".".join(map(str, config.target_torch or ())) or "not set",
        "per-file-ignores": config.per_file_ignores,
        "extend-per-file-ignores": config.extend_per_file_ignores,
        "exclude": config.exclude,
        "extend-exclude": config.extend_exclude,
        "force-exclude": config.force_exclude,
        "respect-gitignore": config.respect_gitignore,
        **{f"semantic.{k}": v for k, v in written(plan.settings.knowledge).items()},
    }
    source = {"target-torch": config.target_torch_source} if config.target_torch else {}
    lines = [
        f"Resolved settings for: {display(path)}",
        f"Settings path: {config.source or 'none (defaults)'}",
        "",
        *(
            f"{key} = {toml_value(value)}" + (f"  # from {source[key]}" if source.get(key) else "")
            for key, value in rows.items()
        ),
        *describe(declared_options(config.rules).values(), plan.settings.options),
        *_origins(plan),
    ]
    return "\n".join(lines) + "\n"


TRUST = (
    "# Local rules and plugins are Python that torchlint runs: the command line runs the\n"
    "# config's local rules, the language server only in a trusted workspace (the editor\n"
    "# setting `trustLocalRules`); installed plugins are trusted as installed."
)


def _origins(plan: RunPlan) -> list[str]:
    """Where the rules come from (those not built in by code), and what runs as trusted."""
    from torchlint.cli.rules import origin
    from torchlint.options import toml_value
    from torchlint.rule import BUILT_IN

    rules = plan.config.rules
    built_in = sum(rules[c].origin == BUILT_IN for c in plan.codes)
    lines = ["", "# Where the rules of the run come from:", f"#   built-in: {built_in} rules"]
    lines += [f"#   {c}: {origin(rules[c])}" for c in plan.codes if rules[c].origin != BUILT_IN]
    folders = [os.path.relpath(folder, plan.config.root) for folder in plan.config.local_rules]
    lines += ["", f"local-rules = {toml_value(folders)}", TRUST]
    return lines


def verbose(plan: RunPlan) -> None:
    """`--verbose`: the settings of the run, first."""
    config = plan.config
    note(f"config: {config.source or 'defaults (no config file found)'}")
    note(f"rules: {', '.join(plan.codes) or 'none'}")
    note(f"target-torch: {_target(config)}")
    note(f"unsafe-fixes: {'on' if plan.unsafe else 'off'}")
    note(f"preview: {'on' if config.preview else 'off'}; min-impact: {config.min_impact}")
    unfixable = plan.unfixable & set(plan.codes)
    if unfixable:
        note(f"unfixable: {', '.join(sorted(unfixable))}")


def _target(config: Config) -> str:
    """`target-torch` and where it comes from (a setting, or the project's metadata)."""
    if config.target_torch is None:
        return "not set"
    target = ".".join(map(str, config.target_torch))
    return f"{target} (from {config.target_torch_source})" if config.target_torch_source else target
