"""GPU sampling through NVML (nvidia-ml-py, import name ``pynvml``), from the parent.

`Nvml` is the thin boundary: every NVML call goes through the module object it holds,
so tests hand it a stand-in that replays recorded series. NVML "utilization" is the
fraction of time *any* kernel was running, not how much of the GPU it used; on Hopper
and newer GPM metrics (SM activity, occupancy, tensor activity) say how busy the SMs were.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import asdict, dataclass, field
from typing import Any

# Clock-event (throttle) reasons, the bit values of nvmlClocksEventReason*.
THERMAL = 0x20 | 0x40 | 0x08  # SW thermal, HW thermal, HW slowdown
POWER = 0x04 | 0x80  # SW power cap, HW power brake

# GPM metric ids (nvml.h): SM activity, SM occupancy, any tensor-core activity.
GPM_METRICS = {"sm_activity": 2, "occupancy": 3, "tensor_activity": 5}


class NvmlUnavailable(Exception):
    """No NVML: no driver, no library, no GPU. The message says which, in a few words."""


@dataclass
class GpuDevice:
    index: int  # NVML index (PCI bus order)
    uuid: str  # "GPU-..." as NVML spells it
    name: str
    handle: Any = field(default=None, repr=False)
    gpm: bool = False  # GPM metrics supported (Hopper and newer)
    gpm_sample: Any = field(default=None, repr=False)


@dataclass
class GpuSample:
    t: float  # time.monotonic() in the parent
    uuid: str
    util_gpu: float | None = None  # % of time a kernel was running
    util_mem: float | None = None  # % of time device memory was read or written
    mem_used: int | None = None  # bytes, whole device
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    throttle: int = 0  # clock-event reason bits
    sm_activity: float | None = None  # GPM, %
    occupancy: float | None = None  # GPM, %
    tensor_activity: float | None = None  # GPM, %

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def normalize_uuid(uuid: str) -> str:
    """Compare NVML's "GPU-xxxx" with torch's bare "xxxx"."""
    u = uuid.strip().lower()
    return u[4:] if u.startswith("gpu-") else u


class Nvml:
    """NVML session. `module` defaults to ``pynvml``, imported on `open`."""

    def __init__(self, module: Any = None) -> None:
        self.nv = module
        self.devices: list[GpuDevice] = []

    def open(self, visible: str | None = None) -> list[GpuDevice]:
        """Initialise NVML and list the GPUs a CUDA process would see with
        ``CUDA_VISIBLE_DEVICES=visible`` (None: all)."""
        if self.nv is None:
            try:
                import pynvml
            except ImportError:
                raise NvmlUnavailable("nvidia-ml-py is not installed") from None
            self.nv = pynvml
        nv = self.nv
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            raise NvmlUnavailable(_init_reason(nv, exc)) from None
        except OSError as exc:
            raise NvmlUnavailable(f"NVML cannot be loaded ({exc})") from None
        try:
            count = nv.nvmlDeviceGetCount()
            found = []
            for index in range(count):
                handle = nv.nvmlDeviceGetHandleByIndex(index)
                found.append(
                    GpuDevice(
                        index,
                        _text(nv.nvmlDeviceGetUUID(handle)),
                        _text(nv.nvmlDeviceGetName(handle)),
                        handle,
                    )
                )
        except nv.NVMLError as exc:
            self.close()
            raise NvmlUnavailable(f"NVML error: {exc}") from None
        self.devices = select_visible(found, visible)
        if not self.devices:
            self.close()
            raise NvmlUnavailable(
                "no NVIDIA GPU" + (f" in CUDA_VISIBLE_DEVICES={visible}" if visible else "")
            )
        for device in self.devices:
            device.gpm = self._gpm_supported(device)
        return self.devices

    def close(self) -> None:
        nv = self.nv
        if nv is None:
            return
        for device in self.devices:
            if device.gpm_sample is not None:
                self._call("nvmlGpmSampleFree", device.gpm_sample)
                device.gpm_sample = None
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()

    def _call(self, name: str, *args: Any) -> Any:
        """One NVML query; None when the GPU or driver does not support it."""
        fn = getattr(self.nv, name, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except Exception:
            return None

    def _gpm_supported(self, device: GpuDevice) -> bool:
        support = self._call("nvmlGpmQueryDeviceSupport", device.handle)
        return bool(getattr(support, "isSupportedDevice", 0))

    def read(self, device: GpuDevice, t: float) -> GpuSample:
        h = device.handle
        s = GpuSample(t, device.uuid)
        util = self._call("nvmlDeviceGetUtilizationRates", h)
        if util is not None:
            s.util_gpu, s.util_mem = float(util.gpu), float(util.memory)
        mem = self._call("nvmlDeviceGetMemoryInfo", h)
        if mem is not None:
            s.mem_used = int(mem.used)
        power = self._call("nvmlDeviceGetPowerUsage", h)  # milliwatts
        if power is not None:
            s.power_w = power / 1000.0
        clock = self._call("nvmlDeviceGetClockInfo", h, getattr(self.nv, "NVML_CLOCK_SM", 1))
        if clock is not None:
            s.sm_clock_mhz = float(clock)
        reasons = self._call("nvmlDeviceGetCurrentClocksEventReasons", h)
        if reasons is None:
            reasons = self._call("nvmlDeviceGetCurrentClocksThrottleReasons", h)
        s.throttle = int(reasons or 0)
        if device.gpm:
            self._read_gpm(device, s)
        return s

    def _read_gpm(self, device: GpuDevice, s: GpuSample) -> None:
        """GPM metrics over the interval since the previous sample of this device."""
        nv = self.nv
        sample = self._call("nvmlGpmSampleAlloc")
        if sample is None:
            device.gpm = False
            return
        if self._call("nvmlGpmSampleGet", device.handle, sample) is None:
            self._call("nvmlGpmSampleFree", sample)
            device.gpm = False
            return
        previous, device.gpm_sample = device.gpm_sample, sample
        if previous is None:
            return
        try:
            request = nv.c_nvmlGpmMetricsGet_t()
            request.version = nv.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = len(GPM_METRICS)
            request.sample1, request.sample2 = previous, sample
            for i, metric in enumerate(GPM_METRICS.values()):
                request.metrics[i].metricId = metric
            result = nv.nvmlGpmMetricsGet(request)
            for i, name in enumerate(GPM_METRICS):
                metric = result.metrics[i]
                if getattr(metric, "nvmlReturn", 0) == 0:
                    setattr(s, name, float(metric.value))
        except Exception:
            device.gpm = False
        finally:
            self._call("nvmlGpmSampleFree", previous)

    def processes(self, device: GpuDevice) -> list[int]:
        """PIDs with a compute context on the device (host PIDs inside containers)."""
        procs = self._call("nvmlDeviceGetComputeRunningProcesses", device.handle) or []
        return [int(getattr(p, "pid", 0)) for p in procs]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _init_reason(nv: Any, exc: Exception) -> str:
    for name, reason in (
        ("NVMLError_LibraryNotFound", "no NVIDIA driver (libnvidia-ml not found)"),
        ("NVMLError_DriverNotLoaded", "the NVIDIA driver is not loaded"),
        ("NVMLError_NoPermission", "no permission to query the NVIDIA driver"),
    ):
        cls = getattr(nv, name, None)
        if cls is not None and isinstance(exc, cls):
            return reason
    return f"NVML failed to initialise ({exc})"


def select_visible(devices: list[GpuDevice], visible: str | None) -> list[GpuDevice]:
    """The devices named by CUDA_VISIBLE_DEVICES (indices or UUID prefixes), in its order.

    An index means NVML's (PCI bus) order, which is CUDA's with
    CUDA_DEVICE_ORDER=PCI_BUS_ID; the UUIDs the script's processes report then narrow
    the set to the devices really used (`pick_used`)."""
    if visible is None:
        return list(devices)
    chosen: list[GpuDevice] = []
    for entry in (e.strip() for e in visible.split(",")):
        if not entry:
            break
        match: GpuDevice | None = None
        if entry.lstrip("-").isdigit():
            index = int(entry)
            if index < 0:
                break  # CUDA stops at the first invalid entry
            match = next((d for d in devices if d.index == index), None)
        else:
            key = normalize_uuid(entry)
            match = next((d for d in devices if normalize_uuid(d.uuid).startswith(key)), None)
        if match is None:
            break
        if match not in chosen:
            chosen.append(match)
    return chosen


def pick_used(devices: list[GpuDevice], uuids: list[str]) -> list[GpuDevice]:
    """The devices whose UUID the script's processes reported (all when none matched)."""
    wanted = {normalize_uuid(u) for u in uuids if u}
    used = [d for d in devices if normalize_uuid(d.uuid) in wanted]
    return used or list(devices)


def visible_devices_env(env: dict[str, str] | None = None) -> str | None:
    return (env if env is not None else os.environ).get("CUDA_VISIBLE_DEVICES")
