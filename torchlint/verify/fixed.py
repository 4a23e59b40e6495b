"""What `torchlint fix` would make of a script verify measures: the script and the files
of its folder it imports, each fixed with what the rest of its project tells it (as a run
of `torchlint fix` over the folder would), without writing anything."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchlint.verify.options import UsageError, VerifyOptions

if TYPE_CHECKING:
    from torchlint.config.plan import RunPlan
    from torchlint.lint.linter import Linter


def load_config_of(script: Path, config_file: Path | None) -> Any:
    from torchlint.config.load import ConfigError, find_config, load_config

    try:
        return load_config(config_file or find_config(script.parent))
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def linter_for(options: VerifyOptions) -> tuple[Linter, RunPlan]:
    """The linter `torchlint fix` would run on the script (its configuration, the project's
    torch, verify's --select/--ignore/--preview), and its plan."""
    from torchlint.config.load import ConfigError, instantiate
    from torchlint.config.plan import Overrides, resolve
    from torchlint.lint.linter import Linter

    script = options.script
    config = load_config_of(script, options.config_file)
    config.read_project_torch(script.parent)
    overrides = Overrides(
        select=options.select, ignore=options.ignore or (), preview=options.preview or None
    )
    try:
        plan = resolve(config, overrides).for_file(script)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    rules = instantiate(plan.codes)
    linter = Linter(rules, plan.settings, plan.unfixable, low_impact=plan.low_impact)
    return linter, plan


@dataclass
class Fixed:
    """What `torchlint fix` would make of the script and the files of its folder it imports
    (each with what the rest of the project tells it)."""

    texts: dict[Path, str]  # the files a fix changes (the script among them, if so) -> fixed
    originals: dict[Path, str]  # ...and their text before
    codes: list[str]  # the codes fixed
    held: list[str]  # codes whose fixes need --unsafe-fixes
    findings: dict[Path, list[Any]]  # each file's findings (left after the fixes), the script first

    def script_text(self, script: Path, text: str) -> str:
        return self.texts.get(script, text)


def build_fixed(options: VerifyOptions, text: str, fix: bool = True) -> Fixed:
    """The fixes the normal fix engine makes under the script's configuration to the
    script and the files of its folder it imports, which a run imports from its mirror
    (`fix=False`: only the findings, with the project's facts)."""
    from torchlint.run.files import Mode, run
    from torchlint.run.runner import discover

    script = options.script
    _, plan = linter_for(options)
    found = discover([str(script.parent)], plan.config)
    files = [script, *_imported_files(script, text, found.files)]
    # compute the fixes, write nothing
    plan = replace(plan, unsafe=options.unsafe_fixes or plan.unsafe)
    bases = {**found.bases, script: found.bases.get(script, script.parent)}
    mode = Mode.DIFF if fix else Mode.CHECK
    results = run(plan, files, mode, bases=bases, walked=found.walked).results
    first = results[0]
    if first.errors:
        raise UsageError(f"{script}: {first.errors[0].message}")
    texts: dict[Path, str] = {}
    originals: dict[Path, str] = {}
    codes: set[str] = set()
    held: set[str] = set()
    findings: dict[Path, list[Any]] = {}
    for path, result in zip(files, results, strict=True):
        if result.errors:
            continue  # a file that does not parse: the run imports it as it is
        findings[path] = result.violations
        held.update(v.code for v in result.violations if v.fix and v.fix.applicability == "unsafe")
        before = text if path == script else _read(path)
        if result.diff is not None and result.text is not None and before is not None:
            texts[path], originals[path] = result.text, before
            codes.update(result.fixed)
    return Fixed(texts, originals, sorted(codes), sorted(held), findings)


def _imported_files(script: Path, text: str, files: Sequence[Path]) -> list[Path]:
    """The `.py` files of the script's folder (among `files`) that the script imports,
    directly or through one another: the code a run executes besides the script (not the
    other scripts of the folder)."""
    from torchlint.project.layout import Layout, imported

    layout = Layout(script.parent, [script, *(f for f in files if f.suffix == ".py")])
    start = layout.key(script)
    if start is None:
        return []
    reached, todo = {start}, [(start, text)]
    while todo:
        key, source = todo.pop()
        names = [i.name for i in imported(source)]
        targets = layout.imports(key, names) | {
            t[0] for n in names if (t := layout.resolve(key, n)) is not None
        }
        for target in sorted(targets - reached):
            reached.add(target)
            todo.append((target, _read(layout.paths[target]) or ""))
    return [layout.paths[k] for k in sorted(reached - {start})]


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
