"""`torchlint server`: the language server (server/), the only way into it."""

from __future__ import annotations

from typing import Annotated

import typer


def server_command(
    stdio: Annotated[
        bool,
        typer.Option(
            "--stdio", help="Talk over stdin/stdout: the only transport (clients often pass it)."
        ),
    ] = False,
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache",
            "-n",
            help="Neither read nor write the projects' summary caches (.torchlint_cache)",
        ),
    ] = False,
) -> None:
    """Run the language server (LSP) an editor starts: diagnostics and quick fixes.

    Needs the server extra: pip install 'torchlint[server]'. Setup for VS Code, Neovim,
    Helix and Emacs: docs/editors.md.
    """
    from torchlint.server import serve

    raise typer.Exit(serve(cache=not no_cache))
