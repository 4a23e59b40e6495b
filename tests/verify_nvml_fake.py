"""A stand-in for the `pynvml` module that replays recorded NVML series.

Readings are replayed in order, one per query, per device; the GPM structures are
the real ctypes ones from nvidia-ml-py (importable without a driver), so the
sampler's ctypes code runs as it would on a GPU.
"""

from __future__ import annotations

import ctypes
import itertools
from types import SimpleNamespace

import pytest

pynvml = pytest.importorskip("pynvml", reason="the NVML stand-in uses nvidia-ml-py's structures")

# Recorded on an H100 SXM (driver 550) while a ResNet-50 trained with a starved
# DataLoader: utilization bursts, power around 300 W, one power-capped reading.
H100_SERIES = [
    # util_gpu, util_mem, mem_used_mib, power_mw, sm_mhz, reasons, sm_act, occupancy, tensor
    (31, 12, 20731, 221000, 1980, 0x0, 18.5, 9.1, 4.2),
    (64, 30, 20731, 318000, 1980, 0x0, 41.0, 20.3, 11.9),
    (12, 4, 20733, 160000, 1980, 0x1, 7.2, 3.3, 1.0),
    (88, 41, 20733, 402000, 1965, 0x4, 60.8, 31.0, 19.4),
    (47, 21, 20735, 287000, 1980, 0x0, 30.1, 14.8, 8.8),
]


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


class FakePynvml:
    """`pynvml` as far as torchlint.verify.nvml uses it."""

    NVMLError = NVMLError
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVML_CLOCK_SM = 1
    NVML_GPM_METRICS_GET_VERSION = pynvml.NVML_GPM_METRICS_GET_VERSION
    c_nvmlGpmMetricsGet_t = pynvml.c_nvmlGpmMetricsGet_t

    def __init__(
        self,
        series=H100_SERIES,
        uuids=("GPU-3f1c2a9e-0000-1111-2222-333344445555",),
        gpm=True,
        processes=(),
        missing_library=False,
    ) -> None:
        self.uuids = list(uuids)
        self.gpm = gpm
        self.process_list = list(processes)
        self.missing_library = missing_library
        self.series = {i: itertools.cycle(series) for i in range(len(uuids))}
        self.current: dict[int, tuple] = {}
        self.gpm_values: dict[int, tuple] = {}
        self.freed = 0
        self.samples: dict[int, tuple | None] = {}
        self.keep: list = []
        self.shutdown = False

    def nvmlInit(self):
        if self.missing_library:
            raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")

    def nvmlShutdown(self):
        self.shutdown = True

    def nvmlDeviceGetCount(self):
        return len(self.uuids)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetUUID(self, h):
        return self.uuids[h].encode()

    def nvmlDeviceGetName(self, h):
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUtilizationRates(self, h):
        # The first query of a reading advances the series.
        self.current[h] = next(self.series[h])
        row = self.current[h]
        return SimpleNamespace(gpu=row[0], memory=row[1])

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(used=self.current[h][2] * 2**20, total=80 * 2**30)

    def nvmlDeviceGetPowerUsage(self, h):
        return self.current[h][3]

    def nvmlDeviceGetClockInfo(self, h, clock):
        assert clock == self.NVML_CLOCK_SM
        return self.current[h][4]

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self.current[h][5]

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=p, usedGpuMemory=2**30) for p in self.process_list]

    def nvmlGpmQueryDeviceSupport(self, h):
        return SimpleNamespace(isSupportedDevice=int(self.gpm))

    def nvmlGpmSampleAlloc(self):
        sample = ctypes.pointer(pynvml.struct_c_nvmlGpmSample_t())
        self.samples[ctypes.addressof(sample.contents)] = None
        self.keep.append(sample)
        return sample

    def nvmlGpmSampleGet(self, h, sample):
        # A GPM sample is a snapshot of counters; the fake keeps the reading's metrics.
        self.samples[ctypes.addressof(sample.contents)] = self.current[h][6:9]
        return sample

    def nvmlGpmSampleFree(self, sample):
        self.samples.pop(ctypes.addressof(sample.contents))
        self.freed += 1

    def nvmlGpmMetricsGet(self, request):
        assert request.version == self.NVML_GPM_METRICS_GET_VERSION
        first = self.samples[ctypes.addressof(request.sample1.contents)]
        values = self.samples[ctypes.addressof(request.sample2.contents)]
        assert first is not None and values is not None
        by_id = {2: values[0], 3: values[1], 5: values[2]}
        for i in range(request.numMetrics):
            request.metrics[i].value = by_id[request.metrics[i].metricId]
            request.metrics[i].nvmlReturn = 0
        return request
