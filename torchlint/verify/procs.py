"""The script's processes, found by process group in /proc: CPU time, RSS, killing.

Every run starts in its own session, so its process group holds the script, its
DataLoader workers and anything else it forks, orphans included.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

PROC = "/proc"
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass
class ProcInfo:
    pid: int
    state: str
    cpu_s: float
    rss: int  # bytes


@dataclass
class CpuSample:
    t: float
    cpu_s: float  # CPU seconds of the group so far, exited members included
    rss: int  # bytes, summed over live members (shared pages count once per process)
    nprocs: int


def have_procfs() -> bool:
    return os.path.isdir(os.path.join(PROC, "self"))


def _stat(pid: int) -> tuple[int, ProcInfo] | None:
    """(pgid, info) of a live process, None when it is gone or a zombie."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    # fields[0] is field 3 of proc(5): state; 5 pgrp; 14/15 utime/stime; 24 rss
    if len(fields) < 22 or fields[0] == b"Z":
        return None
    info = ProcInfo(
        pid,
        fields[0].decode(),
        (int(fields[11]) + int(fields[12])) / _TICK,
        int(fields[21]) * _PAGE,
    )
    return int(fields[2]), info


def group_members(pgid: int) -> list[ProcInfo]:
    """Live (non-zombie) processes of the group: a scan of all of /proc."""
    try:
        names = os.listdir(PROC)
    except OSError:
        return []
    out = []
    for name in names:
        if name.isdigit():
            found = _stat(int(name))
            if found is not None and found[0] == pgid:
                out.append(found[1])
    return out


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


class GroupSampler:
    """Cumulative CPU time and current RSS of one process group.

    Each tick follows the known members and their children (a few files); a full scan
    of /proc every `rescan` ticks also finds members whose parent has exited."""

    def __init__(self, pgid: int, rescan: int = 10) -> None:
        self.pgid = pgid
        self.last: dict[int, float] = {}  # pid -> CPU seconds when last seen
        self.enabled = have_procfs()
        self.members: set[int] = {pgid}
        self.rescan = rescan
        self.ticks = 0

    def _members(self) -> list[ProcInfo]:
        if self.ticks % self.rescan == 0:
            found = group_members(self.pgid)
        else:
            found, todo, seen = [], list(self.members), set()
            while todo:
                pid = todo.pop()
                if pid in seen:
                    continue
                seen.add(pid)
                stat = _stat(pid)
                if stat is None or stat[0] != self.pgid:
                    continue
                found.append(stat[1])
                todo.extend(_children(pid))
        self.ticks += 1
        self.members = {p.pid for p in found}
        return found

    def sample(self, t: float) -> CpuSample | None:
        if not self.enabled:
            return None
        members = self._members()
        for p in members:
            self.last[p.pid] = p.cpu_s
        return CpuSample(t, sum(self.last.values()), sum(p.rss for p in members), len(members))


def alive(pgid: int) -> bool:
    if have_procfs():
        return bool(group_members(pgid))
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_group(pgid: int, wait: float = 3.0, reap=None) -> str | None:
    """SIGINT, then SIGTERM, then SIGKILL, `wait` seconds apart, until no member is left.

    `reap` (the leader's `Popen.poll`) is called while waiting so the leader does not
    linger as a zombie. Returns the last signal sent, None when nothing was running."""
    sent = None
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        if reap is not None:
            reap()
        if not alive(pgid):
            return sent
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return sent
        except PermissionError:
            pass
        sent = signal.Signals(sig).name
        deadline = time.monotonic() + (wait if sig != signal.SIGKILL else 5.0)
        while time.monotonic() < deadline:
            if reap is not None:
                reap()
            if not alive(pgid):
                return sent
            time.sleep(0.05)
    return sent
