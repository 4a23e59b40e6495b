"""The `torchlint` command: parse options, resolve the run plan, run, report.

Exit codes (as ruff): 0 nothing left to report, 1 findings remain, 2 usage,
configuration or I/O error (errors win over findings).

`app.py` holds the typer app and `main`, the entry point (`torchlint`, `python -m
torchlint`); each command lives in a module of its own, and is registered here, in the
order `--help` lists them.
"""

from __future__ import annotations

from torchlint.cli import check, explain, rules, server, verify
from torchlint.cli.app import app, main
from torchlint.cli.flags import command
from torchlint.cli.help import Command, ScriptCommand

__all__ = ["app", "main"]

app.command("check", cls=Command, help="Report problems (exit 1 if any remain).")(
    command(False, check.check)
)
app.command("fix", cls=Command, help="Apply fixes (same as `check --fix`).")(
    command(True, check.check)
)
app.command("rules", cls=Command)(rules.rules_command)
app.command("rule", cls=Command)(rules.rule_command)
app.command("explain", cls=Command)(explain.explain_command)
app.command(
    "verify",
    cls=ScriptCommand,
    # The script's own arguments go after `--`; a mistyped option before it is an error.
    context_settings={"allow_extra_args": True},
)(verify.verify_command)
app.command("server", cls=Command)(server.server_command)
app.command("clean")(check.clean_command)
