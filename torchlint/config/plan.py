"""One plan from a config file and what a command line or an editor sets on top of it
(`Overrides`): the rules, settings, fix and impact policy every file of a run, or a
document in the editor, is linted with (`resolve` -> `RunPlan`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from torchlint.config.load import Config
from torchlint.results import Job
from torchlint.settings import Settings

PerFileIgnores = tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class Overrides:
    """What a command line or an editor sets on top of the config file, as ruff layers
    them: `select` replaces the file's selection, the `extend-*`, `ignore` and
    `unfixable` lists add to it; None (or empty) leaves the file's setting as it is."""

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    fixable: tuple[str, ...] | None = None
    extend_fixable: tuple[str, ...] = ()
    unfixable: tuple[str, ...] = ()
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    unsafe_fixes: bool | None = None
    preview: bool | None = None
    min_impact: str | None = None  # one of IMPACTS
    target_torch: tuple[int, int] | None = None
    target_torch_source: str | None = None  # where it was set (`--target-torch`)
    # (pattern, codes) pairs: `per_file_ignores` replaces the config's per-file-ignores
    per_file_ignores: PerFileIgnores | None = None
    extend_per_file_ignores: PerFileIgnores = ()


@dataclass(frozen=True)
class RunPlan:
    """How a run (the command line's) or a document (the editor's) is linted: one answer
    from one config and its overrides, whoever asks."""

    config: Config  # merged: the files (exclude, per-file-ignores) and where it came from
    codes: tuple[str, ...]  # the rules to run
    settings: Settings  # what the rules read: options, target-torch
    unfixable: frozenset[str]  # codes whose fixes are never applied nor offered
    unsafe: bool  # unsafe fixes are applied and offered
    low_impact: bool  # low-impact findings are shown (and fixed) too
    preview_left_out: tuple[str, ...]  # preview rules named exactly that do not run

    def job(
        self,
        *,
        fix: bool = False,
        diff: bool = False,
        with_edits: bool = False,
        unsafe: bool | None = None,
        codes: tuple[str, ...] | None = None,
    ) -> Job:
        """What to do with each file under this plan: its rules (or `codes`), settings,
        fix policy; the rest is the caller's (fixing, a diff, edits for a reporter)."""
        return Job(
            codes=self.codes if codes is None else codes,
            settings=self.settings,
            fix=fix,
            unsafe=self.unsafe if unsafe is None else unsafe,
            diff=diff,
            with_edits=with_edits,
            unfixable=self.unfixable,
            low_impact=self.low_impact,
        )

    def for_file(self, path: Path) -> RunPlan:
        """This plan for the file at `path`: its per-file ignores left out."""
        return dataclasses.replace(self, codes=tuple(self.config.rules_for(path, self.codes)))


def resolve(config: Config, overrides: Overrides) -> RunPlan:
    """The plan of a run under `config` (discovered, its project's metadata read) with
    the command line's or the editor's `overrides` on top (ConfigError if a selector is
    unknown)."""
    o = overrides
    for _, codes in (*(o.per_file_ignores or ()), *o.extend_per_file_ignores):
        config.expand(codes)  # validates
    merged = config.selecting(o.select, o.extend_select, o.ignore)
    merged = dataclasses.replace(
        merged,
        fixable=merged.fixable if o.fixable is None else list(o.fixable),
        extend_fixable=[*merged.extend_fixable, *o.extend_fixable],
        unfixable=[*merged.unfixable, *o.unfixable],
        exclude=merged.exclude if o.exclude is None else list(o.exclude),
        extend_exclude=[*merged.extend_exclude, *o.extend_exclude],
        unsafe_fixes=merged.unsafe_fixes if o.unsafe_fixes is None else o.unsafe_fixes,
        preview=merged.preview if o.preview is None else o.preview,
        min_impact=o.min_impact or merged.min_impact,
        per_file_ignores=_adding(
            merged.per_file_ignores if o.per_file_ignores is None else {}, o.per_file_ignores or ()
        ),
        extend_per_file_ignores=_adding(merged.extend_per_file_ignores, o.extend_per_file_ignores),
    )
    if o.target_torch is not None:
        merged.target_torch, merged.target_torch_source = o.target_torch, o.target_torch_source
    return RunPlan(
        config=merged,
        codes=tuple(merged.selected_codes()),
        settings=merged.settings(),
        unfixable=merged.unfixable_codes(),
        unsafe=merged.unsafe_fixes,
        low_impact=merged.low_impact,
        preview_left_out=tuple(merged.preview_left_out()),
    )


def _adding(table: dict[str, list[str]], pairs: PerFileIgnores) -> dict[str, list[str]]:
    """A copy of per-file ignores `table` with `pairs` added."""
    out = {pattern: list(codes) for pattern, codes in table.items()}
    for pattern, codes in pairs:
        out.setdefault(pattern, []).extend(codes)
    return out
