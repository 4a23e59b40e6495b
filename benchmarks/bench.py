"""torchlint against TorchFix, ruff and the LibCST parse floor, on real PyTorch code.

    python benchmarks/bench.py [--rounds 3] [--torchfix-rounds 1] [--packages ...]

Builds a corpus from the .py files of PyTorch packages' wheels (downloaded once, with
`pip download`, into benchmarks/.cache/), installs TorchFix and ruff into their own
venvs there, then runs every tool on the same files, interleaved round by round, and
prints a Markdown table (median of the rounds) and the issue #7 targets, met or not;
cold's ratio to the parse floor is also taken round by round (the two run next to each
other), and its median is the target's figure.

Every run is checked before it counts (exit code, no crash, for torchlint every file
checked and its findings counted from its output; cold, warm and one-process runs must
agree): a run that did not do its work stops the benchmark with no figures printed.
CPU is user + system time of the tool's process and all its children (worker processes
included); memory is the peak of the summed proportional set size (PSS) of the process
tree, sampled every 20 ms (Linux; elsewhere the largest single process's RSS).
Needs the torchlint checkout's dependencies in the running interpreter (`pip install -e .`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import venv
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CACHE = HERE / ".cache"
PACKAGES = ["lightning==2.5.0", "accelerate==1.15.0", "torchvision==0.29.1", "timm==1.0.31"]
TORCHFIX = "torchfix==0.7.0"
RUFF = "ruff==0.17.6"

PARSE_ONLY = """
import sys, pathlib, libcst
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.py")):
    libcst.parse_module(path.read_bytes())
"""


# -- setup ------------------------------------------------------------------------------


def pip(*args: str, python: str = sys.executable) -> None:
    subprocess.run([python, "-m", "pip", *args], check=True, stdout=subprocess.DEVNULL)


def corpus(specs: list[str]) -> Path:
    """The .py files of each wheel, under CACHE/corpus/<name>-<version>/ (kept)."""
    wheels, root = CACHE / "wheels", CACHE / "corpus"
    root.mkdir(parents=True, exist_ok=True)
    for spec in specs:
        name, _, version = spec.partition("==")
        target = root / f"{name}-{version or 'latest'}"
        if target.is_dir():
            continue
        download = Path(tempfile.mkdtemp(dir=CACHE))
        print(f"downloading {spec} ...", file=sys.stderr)
        pip("download", "--no-deps", "--only-binary=:all:", "-d", str(download), spec)
        (wheel,) = download.glob("*.whl")
        wheels.mkdir(parents=True, exist_ok=True)
        shutil.move(wheel, wheels / wheel.name)
        shutil.rmtree(download)
        tmp = Path(tempfile.mkdtemp(dir=CACHE))
        with zipfile.ZipFile(wheels / wheel.name) as archive:
            for member in archive.namelist():
                if member.endswith(".py") and ".data/" not in member:
                    archive.extract(member, tmp)
        tmp.rename(target)
    # The corpus sits in this repository's ignored .cache/: tell torchlint not to care.
    (root / "torchlint.toml").write_text("respect-gitignore = false\n")
    return root


def tool_venv(name: str, requirement: str) -> Path:
    """A venv under CACHE/venvs/<name> with `requirement` installed; its bin directory."""
    home = CACHE / "venvs" / name
    marker = home / "installed.txt"
    bindir = home / ("Scripts" if os.name == "nt" else "bin")
    if not (marker.exists() and marker.read_text() == requirement):
        print(f"installing {requirement} into {home} ...", file=sys.stderr)
        shutil.rmtree(home, ignore_errors=True)
        venv.EnvBuilder(with_pip=True).create(home)
        pip("install", "-q", requirement, python=str(bindir / "python"))
        marker.write_text(requirement)
    return bindir


# -- measuring --------------------------------------------------------------------------


def _tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as handle:
                    todo += [int(c) for c in handle.read().split()]
        except OSError:
            pass
    return pids


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


@dataclass
class Sample:
    cpu: float
    wall: float
    peak_mb: float
    returncode: int
    stdout: str = field(default="", repr=False)
    stderr: str = field(default="", repr=False)
    findings: int | None = None  # counted from the output, where the tool's check does


def measure(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> Sample:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", **(env or {})}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=full_env, stdout=out, stderr=err)
        peak = [0]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.02):
                peak[0] = max(peak[0], sum(_pss_kb(p) for p in _tree(proc.pid)))

        sampler = threading.Thread(target=sample, daemon=True)
        if sys.platform == "linux":
            sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        done.set()
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    peak_mb = peak[0] / 1024 if peak[0] else usage.ru_maxrss / 1024
    returncode = os.waitstatus_to_exitcode(status)
    return Sample(usage.ru_utime + usage.ru_stime, wall, peak_mb, returncode, stdout, stderr)


# -- did the run do its work? ---------------------------------------------------------
# Each returns why a run's figures mean nothing (it crashed, checked too few files,
# found nothing where there is something), or None. A crash measured as a figure is
# worse than no figure: bench refuses to print one.

Check = Callable[[Sample], str | None]


# `sh -c EDIT python FILE ARGS...`: FILE with a line added, checked alone, then restored.
EDIT = (
    'cp -p "$1" "$1.bak" && echo "# edited" >> "$1" && "$0" -m torchlint check "$@"; '
    'status=$?; mv "$1.bak" "$1"; exit $status'
)


def exits(*codes: int, finding: str | None = None) -> Check:
    """The exit code is one of `codes`, nothing crashed, and (`finding`: a regular
    expression one line of the output matches per finding) something was found."""

    def check(sample: Sample) -> str | None:
        if sample.returncode not in codes:
            return f"exit code {sample.returncode}, expected {' or '.join(map(str, codes))}"
        if "Traceback (most recent call last)" in sample.stderr or "panicked" in sample.stderr:
            return "it crashed"
        if finding is not None:
            sample.findings = len(re.findall(finding, sample.stdout, re.M))
            if not sample.findings:
                return "it found nothing (the corpus has findings for every tool)"
        return None

    return check


def checked(files: int, findings: bool = True) -> Check:
    """A `torchlint check -v --output-format json-lines --exit-zero` run: exit 0, every
    one of `files` checked (from its -v lines), no file in error, and its findings (some,
    unless `findings` is False)."""

    def check(sample: Sample) -> str | None:
        problem = exits(0)(sample)
        if problem is not None:
            return problem
        announced = re.search(r"^torchlint: (\d+) files? to check$", sample.stderr, re.M)
        done = len(re.findall(r"^torchlint: checked ", sample.stderr, re.M))
        if announced is None or int(announced[1]) != files or done != files:
            return f"it checked {done} of the {files} files"
        records = [json.loads(line) for line in sample.stdout.splitlines()]
        broken = [r["filename"] for r in records if r["code"] in ("TL000", "TL900", "TL901")]
        if broken:
            return f"{len(broken)} file(s) could not be checked, {broken[0]} first"
        sample.findings = len(records)
        return None if records or not findings else "it found nothing (the corpus has findings)"

    return check


def versioned(sample: Sample) -> str | None:
    problem = exits(0)(sample)
    if problem is None and not sample.stdout.startswith("torchlint "):
        return f"it printed {sample.stdout[:80]!r}, not torchlint's version"
    return problem


@dataclass
class Tool:
    name: str
    cmd: list[str]
    check: Check
    env: dict[str, str] = field(default_factory=dict)
    rounds: int = 1_000
    samples: list[Sample] = field(default_factory=list)

    def median(self, attr: str) -> float:
        return statistics.median(getattr(s, attr) for s in self.samples)

    def run(self, cwd: Path) -> None:
        """One more sample; SystemExit (no figures) when the run did not do its work."""
        sample = measure(self.cmd, cwd, self.env)
        problem = self.check(sample)
        if problem is not None:
            tail = (sample.stderr or sample.stdout)[-2000:]
            raise SystemExit(
                f"{self.name}: {problem}; no figures printed.\n"
                f"command: {' '.join(self.cmd)}\n{tail}"
            )
        sample.stdout = sample.stderr = ""  # checked: not kept for --json
        self.samples.append(sample)


def count(root: Path) -> tuple[int, int]:
    files = sorted(root.rglob("*.py"))
    return len(files), sum(p.read_bytes().count(b"\n") for p in files)


# -- the run ----------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--torchfix-rounds", type=int, default=1, help="TorchFix is slow")
    parser.add_argument("--packages", nargs="+", default=PACKAGES, help="pip specs")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if args.rounds < 1 or args.torchfix_rounds < 1:
        parser.error("--rounds and --torchfix-rounds take 1 or more (the table compares them)")

    CACHE.mkdir(exist_ok=True)
    root = corpus(args.packages)
    config = str(root / "torchlint.toml")
    tree = root  # every package's files, one tree
    files, lines = count(tree)
    torchfix = tool_venv("torchfix", TORCHFIX)
    ruff = tool_venv("ruff", RUFF)
    tl = [sys.executable, "-m", "torchlint"]
    cache_dir = Path(tempfile.mkdtemp(prefix="torchlint-bench-cache-"))
    every = sorted(tree.rglob("*.py"))
    ten = [str(p) for p in every[:: max(1, len(every) // 10)][:10]]  # a spread of sizes
    edited = every[len(every) // 2]  # one file a commit changes, after a full run

    ruff_cmd = [
        *(str(ruff / "ruff"), "check", "--isolated", "--no-cache", "--exit-zero", "-q"),
        *("--output-format", "concise"),  # one line per finding, whatever the default
    ]
    # -v counts the files checked, json-lines the findings: what `checked` reads.
    check = [*tl, "check", "--config", config, "--exit-zero", "-v", "--output-format", "json-lines"]
    tools = [
        Tool(
            "LibCST parse only (1 process)", [sys.executable, "-c", PARSE_ONLY, str(tree)], exits(0)
        ),
        Tool(
            "torchlint cold",
            [*check, str(tree)],
            checked(files),
            {"TORCHLINT_CACHE_DIR": str(cache_dir)},
        ),
        Tool(
            "torchlint warm (nothing changed)",
            [*check, str(tree)],
            checked(files),
            {"TORCHLINT_CACHE_DIR": str(cache_dir)},
        ),
        Tool(
            "torchlint cold, 1 process",
            [*check, "--no-cache", str(tree)],
            checked(files),
            {"TORCHLINT_WORKERS": "1"},
        ),
        Tool(
            f"TorchFix {TORCHFIX.split('==')[1]}",
            [str(torchfix / "torchfix"), str(tree)],
            exits(0, 1, finding=r":\d+:\d+: TOR\d+"),
        ),
        Tool(
            f"ruff {RUFF.split('==')[1]}",
            [*ruff_cmd, "--no-respect-gitignore", str(tree)],
            exits(0, finding=r":\d+:\d+: [A-Z]+\d+"),
        ),
        Tool(
            "torchlint, 10 files, no cache (pre-commit)",
            [
                *tl,
                "check",
                "--no-cache",
                "--exit-zero",
                "-v",
                "--output-format",
                "json-lines",
                *ten,
            ],
            checked(len(ten), findings=False),  # ten files may hold none: checked is enough
        ),
        Tool(
            "torchlint, 1 file edited after a full run (pre-commit)",
            ["sh", "-c", EDIT, sys.executable, str(edited), *check[4:]],
            checked(1, findings=False),
            {"TORCHLINT_CACHE_DIR": str(cache_dir)},
        ),
        Tool("torchlint --version", [*tl, "--version"], versioned),
    ]
    tools[4].rounds = args.torchfix_rounds
    for r in range(args.rounds):
        shutil.rmtree(cache_dir, ignore_errors=True)
        for tool in round_order(tools, r):
            if len(tool.samples) >= tool.rounds:
                continue
            print(f"round {r + 1}: {tool.name} ...", file=sys.stderr, flush=True)
            tool.run(ROOT)
    shutil.rmtree(cache_dir, ignore_errors=True)
    counts = {s.findings for t in tools[1:4] for s in t.samples}
    if len(counts) != 1:  # cold, warm and one process must agree
        raise SystemExit(
            f"torchlint's runs disagree on the findings ({sorted(counts)}); no figures"
        )
    report(tools, files, lines, args)


def round_order(tools: list[Tool], r: int) -> list[Tool]:
    """The order of round `r`: rotated round by round, but warm, then one edited file,
    follow cold (they read its cache), and the parse floor runs next to cold, before it
    in even rounds and after it in odd ones (the target's ratio is taken round by round,
    from two runs a minute apart at most)."""
    parse, cold, warm, edited = tools[0], tools[1], tools[2], tools[-2]
    order = tools[r % len(tools) :] + tools[: r % len(tools)]
    order = [t for t in order if t not in (parse, warm, edited)]
    at = order.index(cold) + 1
    order[at:at] = [warm, edited]
    order.insert(order.index(cold) + r % 2, parse)
    return order


def report(tools: list[Tool], files: int, lines: int, args: argparse.Namespace) -> None:
    parse, cold, warm, _, torchfix, *_ = tools
    precommit, edited, version = tools[-3], tools[-2], tools[-1]
    head = (
        "| tool | files | lines | CPU s | wall s | files/s | CPU: TorchFix ÷ this "
        "| CPU: this ÷ parse floor | peak MB |"
    )
    rows = [head, "|" + "---|" * 9]
    for tool in tools:
        cpu, wall = tool.median("cpu"), tool.median("wall")
        n = {precommit.name: 10, edited.name: 1, version.name: 0}.get(tool.name, files)
        n_lines = "" if n != files else f"{lines:,}"
        rows.append(
            f"| {tool.name} | {n or ''} | {n_lines} | {cpu:.2f} | {wall:.2f} | "
            f"{(n / wall if n else 0):,.0f} | {torchfix.median('cpu') / cpu:.1f}x | "
            f"{cpu / parse.median('cpu'):.2f} | {tool.median('peak_mb'):.0f} |"
        )
    rows = [r.replace("| 0 |", "| |") for r in rows]
    machine = (
        f"{datetime.date.today()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, "
        f"libcst {_version('libcst')}, rounds: {args.rounds} (TorchFix {args.torchfix_rounds})"
    )
    try:
        with open("/proc/cpuinfo") as handle:
            model = next(ln.split(":", 1)[1].strip() for ln in handle if "model name" in ln)
        machine = machine.replace(platform.processor() or platform.machine(), model, 1)
    except (OSError, StopIteration):
        pass
    paired = [c.cpu / p.cpu for c, p in zip(cold.samples, parse.samples, strict=True)]
    targets = [
        ("cold CPU ≤ 1.1 x parse floor (paired)", statistics.median(paired) <= 1.1),
        ("cold CPU ≥ 10x less than TorchFix", torchfix.median("cpu") >= 10 * cold.median("cpu")),
        ("warm run ≤ 1 s wall", warm.median("wall") <= 1.0),
        ("pre-commit, 10 files, < 1 s wall", precommit.median("wall") < 1.0),
        ("1 file edited after a full run ≤ 1 CPU s", edited.median("cpu") <= 1.0),
        ("peak memory < 300 MB (cold)", cold.median("peak_mb") < 300),
    ]
    print(f"\n{machine}\n")
    print("\n".join(rows))
    print(
        "\ncold ÷ parse floor, run next to each other in each round: "
        f"{', '.join(f'{r:.2f}' for r in paired)} (median {statistics.median(paired):.2f})\n"
    )
    for name, met in targets:
        print(f"- {'met' if met else 'NOT MET'}: {name}")
    if args.json:
        data = {
            "machine": machine,
            "files": files,
            "lines": lines,
            "tools": {t.name: [s.__dict__ for s in t.samples] for t in tools},
        }
        args.json.write_text(json.dumps(data, indent=2))


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    main()
