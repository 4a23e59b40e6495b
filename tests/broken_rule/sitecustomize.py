"""Loaded at start-up by a Python with this directory on its path (tests/test_server_robustness.py
starts the language server so): TL402's check raises, as a bug in a rule would."""

from torchlint.lint.registry import all_rules, loaded


def _check(self, module):
    raise RuntimeError("TL402 was broken on purpose")


loaded(all_rules()["TL402"]).check = _check  # the rule class, not its catalog entry
