"""Linear time, measured as deterministic work: the Python function calls made to check
and to fix a file of N and of 2N training functions (benchmarks/scaling.py measures the
same files in CPU seconds). A quadratic step anywhere (a rule scanning the file per
finding, a fix pass re-done per fix) roughly doubles the ratio; O(n log n) sorting and
libcst's own work keep it a little above 2."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

from torchlint.config.load import default_options, instantiate
from torchlint.lint.linter import Linter
from torchlint.lint.registry import all_rules
from torchlint.semantic import Settings

from .conftest import benchmark

N = 25
LIMIT = 2.25  # work for 2N over work for N


def calls(run: Callable[[], object]) -> int:
    count = 0

    def profile(frame, event, arg) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return count


@pytest.fixture(scope="module")
def linter() -> Linter:
    return Linter(instantiate(list(all_rules())), Settings(options=default_options()))


@pytest.mark.slow
@pytest.mark.parametrize("unsafe_fix", [False, True], ids=["check", "fix --unsafe-fixes"])
def test_work_grows_linearly(linter: Linter, unsafe_fix: bool):
    scaling = benchmark("scaling")
    work = []
    for n in (N, 2 * N):
        source = scaling.training_functions(n)
        if unsafe_fix:
            outcome = linter.fix(source, "train.py", unsafe=True)
            assert len(outcome.fixed) >= 5 * n  # the work is done...
            assert all(v.fix is None for v in outcome.remaining)  # ...all of it
            work.append(calls(lambda s=source: linter.fix(s, "train.py", unsafe=True)))
        else:
            assert len(linter.lint(source, "train.py")) >= 6 * n
            work.append(calls(lambda s=source: linter.lint(s, "train.py")))
    assert work[1] / work[0] <= LIMIT, work
