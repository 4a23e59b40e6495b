"""The lattices every part of the analysis shares, and the values the rest of a program
may send into a file: where a value lives (CPU | CUDA | ACCELERATOR | UNKNOWN) and what
kind of `nn.Module` it is. Plain data: no CST."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class DeviceKind(str, enum.Enum):
    CPU = "cpu"
    CUDA = "cuda"
    ACCELERATOR = "accelerator"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Device:
    kind: DeviceKind
    index: int | None = None
    cpu_path: bool = False  # a GPU on some path, the CPU (or unknown) on another
    unknown_path: bool = False  # on some path a device we cannot name (an option's value)

    @property
    def is_gpu(self) -> bool:
        return self.kind in (DeviceKind.CUDA, DeviceKind.ACCELERATOR)

    @property
    def is_cpu(self) -> bool:
        return self.kind is DeviceKind.CPU

    def join(self, other: Device) -> Device:
        """The device of a value that is `self` on one path and `other` on another."""
        if self == other:
            return self
        cpu_path = self.cpu_path or other.cpu_path
        unknown = self.unknown_path or other.unknown_path
        unknown = unknown or DeviceKind.UNKNOWN in (self.kind, other.kind)
        if self.kind is other.kind:
            return Device(self.kind, cpu_path=cpu_path, unknown_path=unknown)
        if self.is_gpu and other.is_gpu:
            return Device(DeviceKind.ACCELERATOR, cpu_path=cpu_path, unknown_path=unknown)
        if self.is_gpu or other.is_gpu:  # GPU when present
            gpu = self if self.is_gpu else other
            return Device(gpu.kind, gpu.index, cpu_path=True, unknown_path=unknown)
        return Device(DeviceKind.UNKNOWN, cpu_path=cpu_path)  # CPU and UNKNOWN


CPU = Device(DeviceKind.CPU)
CUDA = Device(DeviceKind.CUDA)
ACCELERATOR = Device(DeviceKind.ACCELERATOR)
UNKNOWN = Device(DeviceKind.UNKNOWN)


def join_all(devices: list[Device]) -> Device | None:
    result: Device | None = None
    for device in devices:
        result = device if result is None else result.join(device)
    return result


class ModelKind(str, enum.Enum):
    NETWORK = "network"  # has parameters: layers, containers, zoo models, your nn.Module
    LOSS = "loss"  # nn.*Loss, criteria
    STATELESS = "stateless"  # no parameters: activations, dropout, pooling...
