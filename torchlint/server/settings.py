"""How each document is linted: its nearest config file, then the editor's settings.

The editor's settings (`initializationOptions`, `workspace/didChangeConfiguration`) act
as the command line's options do: `select` replaces the config's selection, `ignore`
and `extend-select` add to it, `unsafe-fixes` overrides it. `trustLocalRules` lets the
configs' local rules run (Python of the repository: off unless the editor trusts it). A
config file is read once and again whenever it, or any candidate file above the document,
changes on disk.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchlint.config.load import (
    CONFIG_FILES,
    Config,
    ConfigError,
    expand,
    find_config,
    load_config,
)
from torchlint.config.plan import Overrides, RunPlan, resolve

# Setting names, as the config file spells them and in camelCase (VS Code's convention).
_KEYS = {
    "select": "select",
    "ignore": "ignore",
    "extend-select": "extend_select",
    "extendSelect": "extend_select",
    "unsafe-fixes": "unsafe_fixes",
    "unsafeFixes": "unsafe_fixes",
    "trust-local-rules": "trust_local_rules",
    "trustLocalRules": "trust_local_rules",
}
_SWITCHES = ("unsafe_fixes", "trust_local_rules")
SECTION = "torchlint"


@dataclass(frozen=True)
class EditorSettings(Overrides):
    """The overrides an editor may set: those of `_KEYS`."""

    # Load the local rules of the configs (the workspace is trusted: a client sets it
    # from its workspace trust, or the user does).
    trust_local_rules: bool = False

    @classmethod
    def parse(cls, raw: Any) -> EditorSettings:
        """Settings from the editor: an object of the keys above, or one holding it under
        "torchlint" (as clients that send every tool's settings do). ConfigError names a
        key that is unknown or of the wrong type: a typo never silently disables a rule."""
        if raw is None:
            return cls()
        if isinstance(raw, dict) and isinstance(raw.get(SECTION), dict):
            raw = raw[SECTION]
        if not isinstance(raw, dict):
            raise ConfigError(f"settings must be an object, got {raw!r}")
        values: dict[str, Any] = {}
        for key, value in raw.items():
            name = _KEYS.get(key)
            if name is None:
                known = "select, ignore, extend-select, unsafe-fixes, trust-local-rules"
                raise ConfigError(f"unknown setting `{key}` (known: {known})")
            if name in _SWITCHES:
                if value is not None and not isinstance(value, bool):
                    raise ConfigError(f"setting `{key}` must be true or false")
                if value is not None:
                    values[name] = value
            elif value is not None:
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ConfigError(f"setting `{key}` must be a list of rule codes")
                expand(value, unchecked=True)  # validates (the config's rules: `resolve`)
                values[name] = tuple(value)
        return cls(**values)


_Stamp = tuple[int, int] | None


class Configs:
    """The config file nearest each document, loaded once per version on disk."""

    def __init__(self) -> None:
        self._cache: dict[Path, tuple[tuple[_Stamp, ...], Config | ConfigError]] = {}
        self.trusted = False  # local rules are loaded (`trustLocalRules`)

    def clear(self) -> None:
        self._cache.clear()

    def trust(self, trusted: bool) -> None:
        """Load local rules (or not) from now on: every config is read again."""
        if trusted != self.trusted:
            self.trusted = trusted
            self.clear()

    def fresh(self, directory: Path) -> bool:
        """Whether the config last read for `directory` is still what is on disk."""
        cached = self._cache.get(directory)
        return cached is not None and cached[0] == _stamps(directory)

    def config(self, directory: Path, root: Path) -> Config:
        """The config for files in `directory` (ConfigError if it is invalid); with none
        found, the defaults, with patterns relative to `root` (the workspace folder)."""
        stamps = _stamps(directory)
        cached = self._cache.get(directory)
        if cached is None or cached[0] != stamps:
            found: Config | ConfigError
            try:
                path = find_config(directory)
                found = (
                    load_config(path, self.trusted)
                    if path
                    else dataclasses.replace(load_config(None), root=root)
                )
                found.read_project_torch(directory)
            except ConfigError as exc:
                found = exc
            self._cache[directory] = cached = (stamps, found)
        if isinstance(cached[1], ConfigError):
            raise cached[1]
        return cached[1]


def _stamps(directory: Path) -> tuple[_Stamp, ...]:
    """What `find_config` would read from `directory` up: any change is a reload."""
    out: list[_Stamp] = []
    for folder in (directory, *directory.parents):
        for name in CONFIG_FILES:
            try:
                st = os.stat(folder / name)
                out.append((st.st_mtime_ns, st.st_size))
            except OSError:
                out.append(None)
    return tuple(out)


def setup(
    configs: Configs,
    editor: EditorSettings,
    path: Path | None,
    root: Path,
    *,
    per_file: bool = True,
) -> RunPlan | None:
    """How to lint the document at `path` (None: not a file on disk, linted as if in
    `root`), or None when its config excludes it. ConfigError for a bad config. Not
    `per_file`: its per-file-ignores left in the plan's config only, as a run's plan
    (what `explain` reads, to tell a rule ignored in the file from one not selected)."""
    config = configs.config(path.parent if path else root, root)
    if path is not None and config.excluded(path):
        return None
    plan = resolve(config, editor)
    return plan if path is None or not per_file else plan.for_file(path)
