"""TL904 unused-noqa: a `# noqa` comment names a torchlint code that suppresses nothing.

What: a line's `# noqa: TL201` (codes joined by commas or spaces) naming the code of a
built-in rule selected in this run that reports nothing the comment suppresses (on its
line, or on the statement whose first or last line carries it; low-impact findings
count, hidden by default as they are), or naming a code twice. A line's comment is
judged after the file-level `# torchlint: noqa: TL201`, which suppresses first (as
ruff's `# ruff: noqa`). Off by default, as ruff's RUF100: select it (`--extend-select
TL904`); `# torchlint: noqa: TL904` exempts a file.

Left alone, because the comment is shared with other tools and other runs: another
tool's codes (`E501`, `F401`: ruff, flake8 and pylint read the same comment); the codes
of rules not selected in this run (a configuration, `--preview` or a pre-commit hook may
select them), where ruff reports them as non-enabled, and the codes of plugins and
local rules (torchlint cannot tell them from another tool's; ruff reports the codes it
does not know unless `lint.external` lists them); a blanket `# noqa`, which ruff judges
as the only linter it knows of, but which silences every tool; the file-level comments;
and a comment naming TL904 itself (`# noqa: TL201, TL904` keeps TL201 on purpose, as
ruff's `# noqa: RUF100`).

Why: a comment that suppresses nothing hides the next finding on its line: the loader
it once silenced got `num_workers`, and the line's next change that starts loading
synchronously again is never reported. Removing stale comments keeps each one a
decision about a finding that is there.

Bad:
    model = torchvision.models.resnet50().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(train_set, batch_size=64, num_workers=8)  # noqa: TL201
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()

Good (the loader loads on the main process on purpose; E501 is ruff's):
    model = torchvision.models.resnet50().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(train_set, batch_size=64)  # noqa: TL201, E501
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()

Fix (safe): remove the codes that suppress nothing, keeping the others
(`# noqa: E501`), or the whole comment when none is left (the line too, when the
comment was all it held; words after the codes stay a comment). Safe: a comment changes
nothing a program computes, and a code that suppresses nothing unsuppresses nothing when
it goes. `fix` applies it after every other fix, judging the comments on the fixed text.

Impact: Always high: each finding is a comment that hides the next real finding on its
line.

Unknown device: not concerned: the rule reads comments and the findings of the other
rules, never a device.

Sources: ruff's rule RUF100 (unused-noqa) and its `lint.external` setting; flake8's
`# noqa` syntax.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from torchlint.fixes import FixSafety
from torchlint.results import UNUSED_NOQA
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import TorchModule


class UnusedNoqa(Rule):
    # The linter makes TL904's findings (`Linter._unused_noqa`): they are about the
    # other rules' findings and comments, which no rule sees.
    code = UNUSED_NOQA
    name = "unused-noqa"
    fix_safety = FixSafety.SAFE
    default_enabled = False
    tokens = ("noqa", "NOQA")
    pattern = re.compile(r"#\s*noqa:[\s,A-Z0-9]*?\bTL[0-9]", re.I)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        return iter(())
