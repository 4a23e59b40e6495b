"""`torchlint server`: the language server editors start (LSP over stdin/stdout).

It needs the `server` extra (pygls, lsprotocol); the rest of torchlint never imports it.
"""

from __future__ import annotations

import sys

EXTRA = "`torchlint server` needs pygls and lsprotocol: pip install 'torchlint[server]'"


def serve(cache: bool = True) -> int:
    """Run the server until the client exits; 2 when its dependencies are missing
    (`cache`: read and write the projects' summary caches)."""
    try:
        from torchlint.server.protocol import run
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in ("pygls", "lsprotocol"):
            raise
        print(f"torchlint: error: {EXTRA} ({exc})", file=sys.stderr)
        return 2
    return run(cache)
