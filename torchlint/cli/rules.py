"""`torchlint rules` (every rule, a table) and `torchlint rule CODE` (one rule's doc)."""

from __future__ import annotations

from typing import Annotated

import typer

from torchlint.cli.app import EXIT_ERROR, error


def rules_command(
    output_format: Annotated[
        str,
        typer.Option(
            "--output-format", metavar="OUTPUT_FORMAT", help="text (the default) or json."
        ),
    ] = "text",
) -> None:
    """List every rule: code, name, family, fix safety, default on/off, preview."""
    import json

    from torchlint.registry import all_rules, family

    rows = [
        {
            "code": code,
            "name": rule.name,
            "family": family(code),
            "fix": rule.fix_safety.value,
            "default": "on" if rule.default_enabled else "off",
            "preview": "yes" if rule.preview else "no",
            "summary": rule.summary(),
        }
        for code, rule in all_rules().items()
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
    }
    widths = {k: max(len(h), *(len(r[k]) for r in rows)) for k, h in headers.items()}
    typer.echo("  ".join(h.ljust(widths[k]) for k, h in headers.items()).rstrip())
    for row in rows:
        typer.echo("  ".join(row[k].ljust(widths[k]) for k in headers).rstrip())


def rule_command(
    code: Annotated[str, typer.Argument(metavar="RULE", help="A rule code or name, e.g. TL201.")],
) -> None:
    """Print a rule's documentation."""
    from torchlint.registry import all_rules

    rule = all_rules().get(code.upper()) or next(
        (r for r in all_rules().values() if r.name == code), None
    )
    if rule is None:
        error(f"unknown rule {code!r} (see `torchlint rules`)")
        raise typer.Exit(EXIT_ERROR)
    typer.echo(rule.doc())
    default = "on" if rule.default_enabled else "off"
    preview = " Preview: runs only with `--preview`." if rule.preview else ""
    typer.echo(f"\nFix safety: {rule.fix_safety.value}. Default: {default}.{preview}")
