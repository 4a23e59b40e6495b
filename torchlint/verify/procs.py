"""Every process a run starts, found in /proc: CPU time, RSS, and ending them all.

A run starts in its own session, so its process group holds the script, its
DataLoader workers and whatever else it forks, orphans included. Launchers that give
each child a session of its own (torchrun does, per rank) are followed through the
process tree: a descendant's process group joins the set that is sampled and killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

PROC = "/proc"
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass
class ProcInfo:
    pid: int
    pgid: int
    start: int  # start time in clock ticks since boot: tells a reused pid apart
    cpu_s: float
    rss: int  # bytes


@dataclass
class CpuSample:
    t: float
    cpu_s: float  # CPU seconds of the run's processes so far, exited ones included
    rss: int  # bytes, summed over live processes (shared pages count once per process)
    nprocs: int
    machine_busy_s: float | None = None  # CPU seconds of every process on the machine


def machine_busy() -> float | None:
    """Busy CPU seconds of the whole machine since boot (/proc/stat), all cores."""
    try:
        with open(f"{PROC}/stat", "rb") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != b"cpu" or len(fields) < 8:
        return None
    # user nice system idle iowait irq softirq steal: everything but idle and iowait
    ticks = [int(v) for v in fields[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / _TICK


def have_procfs() -> bool:
    return os.path.isdir(os.path.join(PROC, "self"))


def stat(pid: int) -> ProcInfo | None:
    """A live process's figures; None when it is gone or a zombie."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    # fields[k] is field k+3 of proc(5): 3 state, 5 pgrp, 14/15 utime/stime, 22 start, 24 rss
    if len(fields) < 22 or fields[0] == b"Z":
        return None
    return ProcInfo(
        pid,
        int(fields[2]),
        int(fields[19]),
        (int(fields[11]) + int(fields[12])) / _TICK,
        int(fields[21]) * _PAGE,
    )


def _all() -> list[ProcInfo]:
    try:
        names = os.listdir(PROC)
    except OSError:
        return []
    return [p for n in names if n.isdigit() and (p := stat(int(n))) is not None]


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir(f"{PROC}/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"{PROC}/{pid}/task/{tid}/children", "rb") as f:
                out.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return out


class ProcessTree:
    """The processes of one run: its process group, and the groups of its descendants.

    Each `refresh` follows the known processes and their children (a few files); a full
    scan of /proc every `rescan` calls also finds members whose parent has exited."""

    def __init__(self, root: int, rescan: int = 10) -> None:
        self.root = root
        self.groups: set[int] = {root}
        self.known: dict[int, int] = {root: -1}  # pid -> start time (-1: not yet read)
        self.cpu: dict[int, float] = {}  # pid -> CPU seconds when last seen
        self.enabled = have_procfs()
        self.rescan = rescan
        self.calls = 0

    def refresh(self) -> list[ProcInfo]:
        """The live processes of the run now."""
        if not self.enabled:
            return []
        found: dict[int, ProcInfo] = {}
        if self.calls % self.rescan == 0:
            found = {p.pid: p for p in _all() if p.pgid in self.groups}
        self.calls += 1
        todo = [*self.known, *found]
        seen: set[int] = set()
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            info = found.get(pid) or stat(pid)
            if info is None:
                continue
            start = self.known.get(pid)
            if start not in (None, -1, info.start):
                continue  # the pid was reused by an unrelated process
            found[pid] = info
            todo.extend(_children(pid))
        for info in found.values():
            self.known[info.pid] = info.start
            self.groups.add(info.pgid)
        self.known = {pid: s for pid, s in self.known.items() if pid in found}
        return list(found.values())

    def sample(self, t: float) -> CpuSample | None:
        if not self.enabled:
            return None
        members = self.refresh()
        for p in members:
            self.cpu[p.pid] = p.cpu_s
        return CpuSample(
            t, sum(self.cpu.values()), sum(p.rss for p in members), len(members), machine_busy()
        )

    def alive(self) -> bool:
        if self.enabled:
            self.calls = 0  # a full scan: orphans count
            return bool(self.refresh())
        try:
            os.killpg(self.root, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def signal(self, sig: int) -> None:
        for pgid in sorted(self.groups):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)

    def kill(self, wait: float = 3.0, reap: Callable[[], object] | None = None) -> str | None:
        """SIGINT, then SIGTERM, then SIGKILL, `wait` seconds apart, until nothing of the
        run is left. `reap` (the leader's `Popen.poll`) keeps the leader from lingering
        as a zombie. Returns the last signal sent, None when nothing was running."""
        sent = None
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            if reap is not None:
                reap()
            if not self.alive():
                return sent
            self.signal(sig)
            sent = signal.Signals(sig).name
            deadline = time.monotonic() + (wait if sig != signal.SIGKILL else 5.0)
            while time.monotonic() < deadline:
                if reap is not None:
                    reap()
                if not self.alive():
                    return sent
                time.sleep(0.05)
        return sent
