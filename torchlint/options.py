"""A rule option's declaration (its default and, for a number, its range), and values
spelled as TOML spells them, for the messages that name them.

A leaf: rules and the semantic layer declare options with it, the configuration checks
values against it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

Value = bool | int | float | str
_KINDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def toml_value(value: object) -> str:
    """`value` as it would be written in TOML (`true`, `"TL201"`, `[1, 2]`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        pairs = ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items())
        return f"{{ {pairs} }}" if pairs else "{}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(toml_value, value)) + "]"
    if isinstance(value, (int, float, str)):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(str(value), ensure_ascii=False)


@dataclass(frozen=True)
class Option:
    """A configuration option of a rule. A number declares the range it must lie in (a
    value outside it would silently turn the rule off or make its fix nonsense)."""

    default: Value
    minimum: int | float | None = None
    maximum: int | float | None = None

    def __post_init__(self) -> None:
        numeric = type(self.default) in (int, float)
        if numeric and self.minimum is None and self.maximum is None:
            raise ValueError(f"a numeric option declares its range (default {self.default})")
        if self.problem(self.default) is not None:
            raise ValueError(f"default {self.default!r}: {self.problem(self.default)}")

    def problem(self, value: object) -> str | None:
        """Why `value` cannot be this option's value, in TOML's words; None if it can."""
        kind = type(self.default)
        if type(value) is not kind and not (kind is float and type(value) is int):
            return f"must be {_KINDS[kind]}, got {toml_value(value)}"
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        low = self.minimum is not None and value < self.minimum
        high = self.maximum is not None and value > self.maximum
        return f"must be {self.range()}, got {toml_value(value)}" if low or high else None

    def range(self) -> str:
        """`from 2 to 65536`, `at least 1`, `at most 8`; "" for an option without one."""
        if self.minimum is not None and self.maximum is not None:
            return f"from {self.minimum} to {self.maximum}"
        if self.minimum is not None:
            return f"at least {self.minimum}"
        return f"at most {self.maximum}" if self.maximum is not None else ""

    def summary(self) -> str:
        """What a rule's page says of it: `default `32`, from 2 to 65536`."""
        bounds = f", {self.range()}" if self.range() else ""
        return f"default `{toml_value(self.default)}`{bounds}"
