"""The rule API: a rule reads the module model and yields diagnostics with fixes."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import libcst as cst

from torchlint.fixes import Fix, FixSafety
from torchlint.options import Option, T
from torchlint.results import Impact

if TYPE_CHECKING:
    from torchlint.semantic import TorchModule


BUILT_IN = "built-in"  # a rule's origin when it ships with torchlint

# The `pattern` of the rules about how a network trains: the file may hold a training
# step loop of its own (a backward pass or an optimizer step). A loop whose step another
# file's function runs is seen when the project engages or reaches the file, which is
# then analysed whatever its tokens; files that only build networks are not parsed.
TRAINS = re.compile(r"backward|step\(|create_supervised_trainer")  # ignite's trainer too


# Why a rule passes over what it looked at (`Rule.pass_over`), said by several rules.
NO_GPU = "the file places no work on a GPU, nor does its project with what it builds"
NOT_TRAINED = "no training loop iterates it, here or in another file of the project"


@dataclass(frozen=True)
class Diagnostic:
    """A finding on one CST node, before positions are resolved."""

    code: str
    message: str
    node: cst.CSTNode
    fix: Fix | None = None
    impact: Impact = Impact.HIGH


class Rule:
    """Base class of every rule: the built-in ones in `rules/`, local rules and plugins.

    The module docstring of the rule's file is its documentation: the first line is
    `CODE name: summary`, the rest says why, shows bad and good code, the fix and why
    the fix is safe or unsafe, and cites sources. The `Bad:` and `Good:` examples run
    as tests (tests/test_rule_examples.py): the rule reports Bad and not Good, read as
    scripts with the usual imports of the names they use (`torch`, `nn`, `DataLoader`);
    what else the rule needs to see (a GPU, a training loop) they write out.
    """

    code: ClassVar[str]
    name: ClassVar[str]
    fix_safety: ClassVar[FixSafety] = FixSafety.NONE
    default_enabled: ClassVar[bool] = True
    # Found wrong on real code in a shape it cannot yet tell apart (docs/precision.md):
    # runs only in preview mode (`--preview`, `preview = true`), as ruff's preview rules.
    # A rule that is merely rare on the corpus is not in preview.
    preview: ClassVar[bool] = False
    # The file must contain one of these strings for the rule to have anything to say;
    # files that contain none for every selected rule are never parsed.
    tokens: ClassVar[tuple[str, ...]] = ("torch",)
    # A narrower cheap test, for a rule whose tokens are common in files it has nothing
    # to say about: the file (that has a token) must also match this expression.
    pattern: ClassVar[re.Pattern[str] | None] = None
    # Options read from the configuration, as declared (options.py); rules that share an
    # option share its declaration (the registry checks).
    options: ClassVar[tuple[Option[Any], ...]] = ()
    # Where the rule comes from, as `torchlint rules` and `--show-settings` say: set by
    # the registry ("built-in", "local <folder>", "plugin <distribution>").
    origin: ClassVar[str] = BUILT_IN
    # Guards the linter applies before `check` runs (`applies`), so a rule need not
    # repeat them: silent in a file whose devices and loops a framework owns
    # (`module.placement.managed`: Lightning, Accelerate, DeepSpeed, the transformers Trainer) ...
    skips_managed: ClassVar[bool] = False
    # ... and in a project that supports a torch older than this (`target-torch`).
    min_torch: ClassVar[tuple[int, int] | None] = None

    # Why the rule passed over what it looked at, kept only where a caller asks for it
    # (`torchlint explain` sets a list): (the node, or None for the whole file; why).
    passed: list[tuple[cst.CSTNode | None, str]] | None = None

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        raise NotImplementedError

    def pass_over(self, node: cst.CSTNode | None, why: str | Callable[[], str]) -> None:
        """Say why the rule does not report what it looked at (`node`; None: anything in
        the file): `torchlint explain` shows it at the node's lines; a run keeps nothing
        (a reason costly to word is given as a function, called only when asked)."""
        if self.passed is not None:
            self.passed.append((node, why() if callable(why) else why))

    def applies(self, module: TorchModule) -> bool:
        """The rule's guards hold for this file: only then does the linter run `check`."""
        return self.guard(module) is None

    def guard(self, module: TorchModule) -> str | None:
        """Which of the rule's guards keeps it out of this file, as `torchlint explain`
        says it; None where none does."""
        if self.skips_managed and module.placement.managed:
            return (
                "a framework runs the training here and owns its devices and loops (Lightning, "
                "Accelerate, DeepSpeed, the transformers Trainer): the rule leaves them to it"
            )
        target = module.target_torch
        if self.min_torch is None or target is None or target >= self.min_torch:
            return None
        return (
            f"the project supports a torch older than {'.'.join(map(str, self.min_torch))}, "
            "which the advice needs (`target-torch`)"
        )

    @property
    def explaining(self) -> bool:
        """A caller asks why the rule passes over what it looks at (`passed` is kept):
        work done only to say so is skipped otherwise."""
        return self.passed is not None

    def option(self, module: TorchModule, option: Option[T]) -> T:
        """The configured value of one of this rule's options, else its default."""
        if option not in self.options:
            raise KeyError(f"{self.code} reads `{option.name}` but does not declare it")
        return option.value(module.settings.options)

    def diagnostic(
        self,
        node: cst.CSTNode,
        message: str,
        fix: Fix | None = None,
        impact: Impact = Impact.HIGH,
    ) -> Diagnostic:
        """A finding of this rule; a LOW `impact` says why in `message` (the rule's doc
        says what makes a case low)."""
        return Diagnostic(self.code, message, node, fix, impact)

    @classmethod
    def doc(cls) -> str:
        """The docstring (the class's own, else its module's: a module of several rules
        documents each in its class), then an `Options:` section from the declarations."""
        own = cls.__dict__.get("__doc__")
        text = (own or sys.modules[cls.__module__].__doc__ or "").strip()
        if not cls.options:
            return text
        return f"{text}\n\nOptions: {'; '.join(o.summary() for o in cls.options)}."

    @classmethod
    def summary(cls) -> str:
        first = cls.doc().splitlines()[0] if cls.doc() else ""
        return first.split(":", 1)[1].strip() if ":" in first else first
