"""`python -m torchlint.verify SCRIPT [options] [-- script args]` (the same as
`torchlint verify`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from torchlint.verify.command import EXIT_USAGE, verify


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        print(f"torchlint verify: error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="torchlint verify", description=__doc__)
    p.add_argument("script")
    p.add_argument("--select", action="append")
    p.add_argument("--ignore", action="append")
    p.add_argument("--unsafe-fixes", action="store_true")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--interval", type=float, default=100.0, help="sampling interval, ms")
    p.add_argument("--json", dest="json_out")
    p.add_argument("--plot")
    p.add_argument("--tune-batch-size", action="store_true")
    p.add_argument("--apply", action="store_true")
    p.add_argument("--nproc-per-node", type=int)
    p.add_argument("--config")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    script_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, script_args = argv[:cut], argv[cut + 1 :]
    ns = parser().parse_args(argv)
    split = lambda values: [c.strip() for v in values for c in v.split(",") if c.strip()]  # noqa: E731
    return verify(
        ns.script,
        script_args,
        select=split(ns.select) if ns.select else None,
        ignore=split(ns.ignore) if ns.ignore else None,
        unsafe_fixes=ns.unsafe_fixes,
        steps=ns.steps,
        warmup=ns.warmup,
        repeats=ns.repeats,
        timeout=ns.timeout,
        interval_ms=ns.interval,
        json_out=ns.json_out,
        plot=ns.plot,
        tune_batch_size=ns.tune_batch_size,
        apply=ns.apply,
        nproc_per_node=ns.nproc_per_node,
        config_file=ns.config,
    )


if __name__ == "__main__":
    sys.exit(main())
