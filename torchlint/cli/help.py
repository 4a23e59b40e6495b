"""Help laid out as ruff's, and the headings the options are listed under."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterable
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:  # the types of the click this typer is built on (its own copy)
    from typer._click import Context, HelpFormatter, Parameter

# click's exceptions, wherever this typer takes click from (a copy of its own lately).
_CLICK_ERRORS = sys.modules[typer.BadParameter.__module__]

RULES, FILES, MISC, LOG = "Rule selection", "File selection", "Miscellaneous", "Log levels"
PANELS = (RULES, FILES, MISC, LOG)


class Command(typer.core.TyperCommand):
    """Help laid out as ruff's: options under headings, each on its own line with its
    value named (`<RULE_CODE>`) and its description below; no defaults and no `--no-x`
    twins (each description names its opposite); a required argument reads `<CODE>`.
    A mistyped option is offered only the options whose names are close to it."""

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        return [_required(piece) for piece in super().collect_usage_pieces(ctx)]

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except _CLICK_ERRORS.NoSuchOption as exc:
            close = _close_options(exc.option_name, self.get_params(ctx))
            raise _CLICK_ERRORS.NoSuchOption(
                exc.option_name, possibilities=close, ctx=ctx
            ) from None

    def format_options(self, ctx: Context, formatter: HelpFormatter) -> None:
        arguments: list[tuple[str, str]] = []
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            help = getattr(param, "help", None) or ""
            if getattr(param, "hidden", False):
                continue
            if param.param_type_name == "argument":
                arguments.append((" ".join(map(_required, param.get_usage_pieces(ctx))), help))
                continue
            panel = getattr(param, "rich_help_panel", None) or "Options"
            sections.setdefault(panel, []).append((_option_name(param), help))
        if arguments:
            with formatter.section("Arguments"):
                formatter.write_dl(arguments)
        for title in ("Options", *PANELS):
            if title not in sections:
                continue
            with formatter.section(title):
                for name, help in sections[title]:
                    formatter.write(" " * formatter.current_indent + name + "\n")
                    indent = " " * (formatter.current_indent + 8)
                    formatter.write(
                        textwrap.fill(
                            help, formatter.width, initial_indent=indent, subsequent_indent=indent
                        )
                        + "\n"
                    )


class ScriptCommand(Command):
    """`verify`: the script's own arguments follow `--`."""

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        return [*super().collect_usage_pieces(ctx), "[-- ARGS]..."]


def _option_name(param: Parameter) -> str:
    """`-o, --output-file <OUTPUT_FILE>`; a flag shows the spelling that changes its
    default (`fix --no-fix`)."""
    names = param.secondary_opts if param.default is True else param.opts
    short = [n for n in names if not n.startswith("--")]
    name = ", ".join([*short, *(n for n in names if n.startswith("--"))])
    if not short:
        name = "    " + name
    if not getattr(param, "is_flag", False):
        name += f" <{param.metavar}>"
    return name


def _close_options(name: str, params: Iterable[Parameter]) -> list[str]:
    """The visible long options spelled like `name`, compared without their dashes
    (click compares them with, which makes `--bogus` look like `--verbose`)."""
    import difflib

    names = {
        option[2:]
        for param in params
        if not getattr(param, "hidden", False)
        for option in (*param.opts, *param.secondary_opts)
        if option.startswith("--")
    }
    return ["--" + n for n in difflib.get_close_matches(name.lstrip("-"), sorted(names), n=3)]


def _required(piece: str) -> str:
    """Typer writes a required argument `{CODE}`; ruff (clap) writes `<CODE>`."""
    return f"<{piece[1:-1]}>" if piece.startswith("{") and piece.endswith("}") else piece
