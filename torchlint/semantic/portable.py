"""Portable values: what an expression may hold (a device, a network, DataLoaders, an
optimizer) and what a function does with a parameter (`Effect`), as plain data another
file's analysis reads, joined over paths and written as JSON."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from typing import Any

from torchlint.semantic.lattice import Device, DeviceKind, ModelKind, join_all

OPTIMIZER, SCALER = "optimizer", "scaler"


def _join_device(a: Device | None, b: Device | None) -> Device | None:
    return join_all([d for d in (a, b) if d is not None])


def _device_json(device: Device | None) -> list[Any] | None:
    if device is None:
        return None
    return [device.kind.value, device.index, device.cpu_path, device.unknown_path]


def _device(data: list[Any] | None) -> Device | None:
    return None if data is None else Device(DeviceKind(data[0]), *data[1:])


@dataclass(frozen=True)
class Network:
    """An `nn.Module` built in another file, or presumed from how a parameter is used."""

    kind: ModelKind
    site: str | None = None  # the model site that builds it ("path@i"), for its uses
    cls: str | None = None  # what builds it: a class/factory qualname or reference
    on_gpu: bool = False  # moved to a GPU where it is built (on some path)
    wrapped: bool = False  # DataParallel / DistributedDataParallel around it
    layers: frozenset[str] = frozenset()  # the torch.nn layers it is built from
    parameters: int | None = None
    sequence_first: bool = False
    presumed: bool = False  # nothing shows where it is built: a network by its use
    frozen: bool = False  # its class sets or tests its parameters' `requires_grad`

    def join(self, other: Network) -> Network:
        if self == other:
            return self
        return Network(
            self.kind if self.kind is other.kind else ModelKind.NETWORK,
            self.site if self.site == other.site else None,
            self.cls if self.cls == other.cls else None,
            self.on_gpu or other.on_gpu,
            self.wrapped and other.wrapped,
            self.layers & other.layers,
            None,
            self.sequence_first and other.sequence_first,
            self.presumed and other.presumed,
            self.frozen or other.frozen,
        )

    def to_json(self) -> dict[str, Any]:
        data = plain(self)
        data["kind"] = self.kind.value
        data["layers"] = sorted(self.layers)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Network:
        return cls(**{**data, "kind": ModelKind(data["kind"]), "layers": frozenset(data["layers"])})


@dataclass(frozen=True)
class Value:
    """What an expression may hold, as far as another file needs to know."""

    device: Device | None = None
    network: Network | None = None
    loaders: frozenset[str] = frozenset()  # DataLoader sites ("path#i")
    pinned: frozenset[str] = frozenset()  # those of them that pin memory
    optimizer: str | None = None  # OPTIMIZER or SCALER
    instance: str | None = None  # a class of the project it is an instance of ("path::C")
    params: frozenset[str] = frozenset()  # parameters it may also be (resolved by linking)
    number: int | None = None  # an int constant (`BATCH_SIZE = 8`, a literal passed)

    def __bool__(self) -> bool:
        return bool(
            self.device
            or self.network
            or self.loaders
            or self.pinned
            or self.optimizer
            or self.instance
            or self.params
            or self.number is not None
        )

    def join(self, other: Value) -> Value:
        network = (
            self.network.join(other.network)
            if self.network is not None and other.network is not None
            else self.network or other.network
        )
        return Value(
            _join_device(self.device, other.device),
            network,
            self.loaders | other.loaders,
            self.pinned | other.pinned,
            _same(self.optimizer, other.optimizer),
            _same(self.instance, other.instance),
            self.params | other.params,
            self.number if self.number == other.number else None,
        )

    def without_params(self) -> Value:
        return replace(self, params=frozenset())

    def within(self, other: Value) -> bool:
        """Every fact of this value (its parameters aside) is one `other` holds."""
        return (
            self.loaders <= other.loaders
            and self.pinned <= other.pinned
            and all(
                getattr(self, f) in (None, getattr(other, f))
                for f in ("device", "network", "optimizer", "instance", "number")
            )
        )

    def telling(self) -> Value | None:
        """What of it tells the receiver something (an UNKNOWN device tells nothing a
        parameter does not already say), or None."""
        device = self.device
        found = replace(self, device=None) if device and device.kind is DeviceKind.UNKNOWN else self
        return found if found else None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.device is not None:
            data["device"] = _device_json(self.device)
        if self.network is not None:
            data["network"] = self.network.to_json()
        for name in ("loaders", "pinned", "params"):
            if getattr(self, name):
                data[name] = sorted(getattr(self, name))
        for name in ("optimizer", "instance", "number"):
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Value:
        network = data.get("network")
        return cls(
            _device(data.get("device")),
            Network.from_json(network) if network is not None else None,
            frozenset(data.get("loaders", ())),
            frozenset(data.get("pinned", ())),
            data.get("optimizer"),
            data.get("instance"),
            frozenset(data.get("params", ())),
            data.get("number"),
        )


def _same(a: str | None, b: str | None) -> str | None:
    """One of two facts that may be missing: the one known, else None if they differ."""
    return b if a is None else a if b is None or a == b else None


def join_values(values: Iterable[Value | None]) -> Value | None:
    result: Value | None = None
    for value in values:
        if value is not None:
            result = value if result is None else result.join(value)
    return result


@dataclass(frozen=True)
class Effect:
    """What a function does with one of its parameters (a loader or a model it is
    given), for the site that built the value: how it is trained on."""

    trains: bool = False  # a training loop iterates it (a loader) or calls it (a model)
    steps: bool = False  # ... a step loop: once per optimizer step
    repeated: bool = False  # again and again in one call (epochs)
    gpu: bool = False  # its batches, or the model, go to a GPU
    guarded: bool = False  # the loops run under `if __name__ == "__main__":` only
    devices: frozenset[str] = frozenset()  # parameters naming where they go (linking)
    cpu: bool = False  # every loop over it runs on the CPU (`batches.cpu_loop`)

    def join(self, other: Effect) -> Effect:
        return Effect(
            self.trains or other.trains,
            self.steps or other.steps,
            self.repeated or other.repeated,
            self.gpu or other.gpu,
            self.guarded and other.guarded,
            self.devices | other.devices,
            self.cpu and other.cpu,
        )

    def to_json(self) -> dict[str, Any]:
        return {**plain(self), "devices": sorted(self.devices)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Effect:
        return cls(**{**data, "devices": frozenset(data["devices"])})


def plain(obj: Any) -> dict[str, Any]:
    """A dataclass's fields by name."""
    return {f.name: getattr(obj, f.name) for f in fields(obj)}
