"""`torchlint verify`: measure a script as it is and as torchlint would fix it.

An optional extra (``pip install 'torchlint[verify]'``): the parent side (harness, NVML
sampler, statistics, report) imports torch and pynvml only when it needs them; the
launcher runs inside the measured subprocess.
"""

from __future__ import annotations

from typing import Any


def verify(*args: Any, **kwargs: Any) -> int:
    """See `torchlint.verify.command.verify`."""
    from torchlint.verify.command import verify as run

    return run(*args, **kwargs)


__all__ = ["verify"]
