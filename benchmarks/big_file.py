"""torchlint on a generated file too large to parse: CPU time and peak memory.

    python benchmarks/big_file.py [--mb 50]

Writes a table of MB megabytes with no rule's token (so no rule reads it) into a
temporary directory, runs `torchlint check --no-cache` on it once, checks the run did
what it should (exit 0, the "too large to check" warning, no traceback) and prints the
CPU time (user + system) and the peak resident memory of the process. Issue #26's
bounds for 50 MB: 5 CPU s and 1 GB (CPython's own parser would take about 40 s and
8 GB on this file, libcst's more: neither runs).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROW = "    (123456, 0.123456, 'name_123456', [1, 2, 3]),\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=50.0, help="size of the generated file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="torchlint-big-") as folder:
        path = Path(folder) / "table.py"
        path.write_text("TABLE = [\n" + ROW * int(args.mb * 1e6 / len(ROW)) + "]\n")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        result = subprocess.run(
            [sys.executable, "-m", "torchlint", "check", "--no-cache", str(path)],
            capture_output=True,
            text=True,
            env={**os.environ, "NO_COLOR": "1"},
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        size = path.stat().st_size
    if result.returncode != 0 or "too large to check" not in result.stderr:
        raise SystemExit(f"the run did not do what it should:\n{result.stdout}{result.stderr}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    peak = after.ru_maxrss / 1024  # KB on Linux
    print(f"{size / 1e6:.1f} MB generated .py: {cpu:.2f} CPU s, peak {peak:.0f} MB")
    print(result.stderr.strip())


if __name__ == "__main__":
    main()
