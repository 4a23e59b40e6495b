"""`Settings`: what rules may read of the configuration.

A leaf: it imports nothing of torchlint, so the configuration, the result types, the
semantic layer and the engine all share it without importing one another."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class StepFunction:
    """A callable that runs a backward pass and/or an optimizer step
    (`[tool.torchlint.semantic] step-functions`)."""

    name: str  # its qualified name, as imported ("mylib.train.backward_and_step")
    backward: bool = True  # each call runs a backward pass
    step: bool = True  # each call runs an optimizer step
    # The argument that passes the optimizer: a keyword, or a position from 0.
    optimizer: str | int | None = None


@dataclass(frozen=True)
class LoaderFactory:
    """A callable that returns a DataLoader (`loader-factories`)."""

    name: str
    # The parameters (a keyword, or a position counted from 0) that carry the loader's
    # batch size, worker count and whether it pins memory; None: the factory's business.
    batch_size: str | int | None = None
    workers: str | int | None = None
    pin_memory: str | int | None = None

    def parameter(self, name: str) -> str | int | None:
        """Where a call passes the DataLoader parameter `name` (`batch_size`,
        `num_workers`, `pin_memory`); None where the entry does not say."""
        return {
            "batch_size": self.batch_size,
            "num_workers": self.workers,
            "pin_memory": self.pin_memory,
        }.get(name)


@dataclass(frozen=True)
class Knowledge:
    """What the analysis cannot see and the project tells it, by qualified name
    (`[tool.torchlint.semantic]`): plain, hashable data."""

    step_functions: tuple[StepFunction, ...] = ()
    loader_factories: tuple[LoaderFactory, ...] = ()
    model_factories: tuple[str, ...] = ()  # callables that return a network
    device_functions: tuple[str, ...] = ()  # ... the training device (a GPU when there is one)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def named_in(self, text: str) -> bool:
        """The text may call one of the callables named (its last name is in it: an
        import or a call must spell it), for the cheap tests that skip a file."""
        names = [*self.model_factories, *self.device_functions]
        names += [s.name for s in self.step_functions] + [f.name for f in self.loader_factories]
        return any(name.rpartition(".")[2] in text for name in names)


@dataclass
class Settings:
    """What rules may read of the configuration."""

    options: dict[str, Any] = field(default_factory=dict)
    target_torch: tuple[int, int] | None = None
    knowledge: Knowledge = field(default_factory=Knowledge)
