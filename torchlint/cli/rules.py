"""`torchlint rules` (every rule, a table) and `torchlint rule CODE` (one rule's doc)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from torchlint.cli.app import EXIT_ERROR, ConfigOpt, error, load

if TYPE_CHECKING:
    from torchlint.rule import Rule


def _rules(config_file: Path | None) -> dict[str, type[Rule]]:
    """The rules of the config given, else of the one nearest the working directory:
    built-in, installed (plugins) and local."""
    from torchlint.config.load import ConfigError

    try:
        return load(config_file, []).rules
    except ConfigError as exc:
        error(str(exc))
        raise typer.Exit(EXIT_ERROR) from None


def origin(rule: type[Rule]) -> str:
    """Where a rule comes from; a local rules folder relative to the working directory."""
    kind, _, where = rule.origin.partition(" ")
    return f"local {os.path.relpath(where)}" if kind == "local" else rule.origin


def rules_command(
    config_file: ConfigOpt = None,
    output_format: Annotated[
        str,
        typer.Option(
            "--output-format", metavar="OUTPUT_FORMAT", help="text (the default) or json."
        ),
    ] = "text",
) -> None:
    """List every rule: code, name, family, fix safety, default on/off, preview, origin
    (built-in, a local rules folder, a plugin)."""
    import json

    from torchlint.lint.registry import family

    rows = [
        {
            "code": code,
            "name": rule.name,
            "family": family(code),
            "fix": rule.fix_safety.value,
            "default": "on" if rule.default_enabled else "off",
            "preview": "yes" if rule.preview else "no",
            "origin": origin(rule),
            "summary": rule.summary(),
        }
        for code, rule in _rules(config_file).items()
    ]
    if output_format == "json":
        typer.echo(json.dumps(rows, indent=2))
        return
    if output_format != "text":
        error(f"unknown output format {output_format!r} (choose text or json)")
        raise typer.Exit(EXIT_ERROR)
    headers = {
        "code": "Code",
        "name": "Name",
        "family": "Family",
        "fix": "Fix",
        "default": "Default",
        "preview": "Preview",
        "origin": "Origin",
    }
    widths = {k: max(len(h), *(len(r[k]) for r in rows)) for k, h in headers.items()}
    typer.echo("  ".join(h.ljust(widths[k]) for k, h in headers.items()).rstrip())
    for row in rows:
        typer.echo("  ".join(row[k].ljust(widths[k]) for k in headers).rstrip())


def rule_command(
    code: Annotated[str, typer.Argument(metavar="RULE", help="A rule code or name, e.g. TL201.")],
    config_file: ConfigOpt = None,
) -> None:
    """Print a rule's documentation."""
    rules = _rules(config_file)
    rule = rules.get(code.upper()) or next((r for r in rules.values() if r.name == code), None)
    if rule is None:
        error(f"unknown rule {code!r} (see `torchlint rules`)")
        raise typer.Exit(EXIT_ERROR)
    typer.echo(rule.doc())
    default = "on" if rule.default_enabled else "off"
    preview = " Preview: runs only with `--preview`." if rule.preview else ""
    typer.echo(
        f"\nFix safety: {rule.fix_safety.value}. Default: {default}.{preview} "
        f"Origin: {origin(rule)}."
    )
