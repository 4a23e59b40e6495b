"""`torchlint verify`: measure a script as it is and as torchlint would fix it.

An optional extra (``pip install 'torchlint[verify]'``): the parent side (harness, NVML
sampler, statistics, report) imports torch and pynvml only when it needs them; the
launcher runs inside the measured subprocess.
"""

from __future__ import annotations

from typing import Any

from torchlint.verify.options import VerifyOptions


def verify(options: VerifyOptions, **kwargs: Any) -> int:
    """See `torchlint.verify.command.verify`."""
    from torchlint.verify.command import verify as run

    return run(options, **kwargs)


__all__ = ["VerifyOptions", "verify"]
