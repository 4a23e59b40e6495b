"""Golden runs: what the CLI prints on the corpus, recorded once and compared byte for byte
after a change that must not change any result (a refactoring of the run layer, say).

    python benchmarks/golden.py record OUT [REPO...]    # write every run's output to OUT
    python benchmarks/golden.py compare OUT [REPO...]   # run again; exit 1 on a difference

Each repository of the corpus (default: a few of ../shared/corpus, beside the
repository; `--all` adds a run over the whole corpus) is checked with every rule and the
preview ones, as JSON: without the cache, in one process (TORCHLINT_WORKERS=1), and
twice with a fresh cache in a temporary folder (cold, then warm); then `fix --diff
--unsafe-fixes`, without and with the cache. Nothing is written in the corpus. The runs
use this interpreter's torchlint (`python -m torchlint`): record with the code before,
compare with the code after.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
REPOS = ["yolov5", "lightning-examples", "deeplearning-models", "Pytorch-UNet"]
CHECK = ["check", "--select", "ALL", "--preview", "--output-format", "json", "--exit-zero"]
DIFF = ["fix", "--select", "ALL", "--preview", "--diff", "--unsafe-fixes", "--exit-zero"]


def _run(args: list[str], cwd: Path, **env: str) -> bytes:
    """stdout and stderr of `torchlint ARGS`, as one record."""
    done = subprocess.run(
        [sys.executable, "-m", "torchlint", *args],
        cwd=cwd,
        capture_output=True,
        env={**os.environ, **env},
    )
    return done.stdout + b"\n--- stderr ---\n" + done.stderr


def runs(corpus: Path, repos: list[str], whole: bool) -> dict[str, bytes]:
    """Every run's output, by a name for it."""
    out: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="torchlint-golden-") as tmp:
        for repo in [*repos, *(["."] if whole else [])]:
            name = "all" if repo == "." else repo
            cache, alone = str(Path(tmp) / name), {"TORCHLINT_WORKERS": "1"}
            out[f"check-{name}"] = _run([*CHECK, "--no-cache", repo], corpus)
            out[f"check1-{name}"] = _run([*CHECK, "--no-cache", repo], corpus, **alone)
            out[f"cold-{name}"] = _run([*CHECK, repo], corpus, TORCHLINT_CACHE_DIR=cache)
            out[f"warm-{name}"] = _run([*CHECK, repo], corpus, TORCHLINT_CACHE_DIR=cache)
            out[f"diff-{name}"] = _run([*DIFF, "--no-cache", repo], corpus)
            out[f"diffcache-{name}"] = _run([*DIFF, repo], corpus, TORCHLINT_CACHE_DIR=cache)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["record", "compare"])
    parser.add_argument("out", type=Path, help="the folder of the recorded outputs")
    parser.add_argument("repos", nargs="*", default=REPOS, help="folders of the corpus")
    parser.add_argument("--all", action="store_true", help="also run over the whole corpus")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    args = parser.parse_args()
    if not args.corpus.is_dir():
        parser.error(f"no corpus at {args.corpus} (--corpus)")
    found = runs(args.corpus, args.repos, args.all)
    if args.action == "record":
        args.out.mkdir(parents=True, exist_ok=True)
        for name, output in found.items():
            (args.out / f"{name}.out").write_bytes(output)
        print(f"recorded {len(found)} runs in {args.out}")
        return 0
    differ = []
    for name, output in found.items():
        path = args.out / f"{name}.out"
        if not path.exists() or path.read_bytes() != output:
            differ.append(name)
    for name in differ:
        print(f"differs: {name} ({args.out / name}.out)")
    print(f"{len(found) - len(differ)} of {len(found)} runs byte-identical")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
