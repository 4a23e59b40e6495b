"""`Settings`: what rules may read of the configuration.

A leaf: it imports nothing of torchlint, so the configuration, the result types, the
semantic layer and the engine all share it without importing one another."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Settings:
    """What rules may read of the configuration."""

    options: dict[str, Any] = field(default_factory=dict)
    target_torch: tuple[int, int] | None = None
