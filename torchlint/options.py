"""Rule options as typed declarations (name, type, default, range, doc), the options
several rules share, and values spelled as TOML spells them, for the messages that name
them.

A leaf: rules declare their options with it (those several rules share are declared
here), the registry checks that rules sharing a name share its declaration, the
configuration checks values against it, and a rule's documentation and
`--show-settings` describe it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T", bool, int, float, str)
# The lowest and highest value a number may take; None: unbounded on that side.
Range = tuple[int | float | None, int | float | None]
_KINDS: dict[type, str] = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string",
}
_TYPE_NAMES: dict[type, str] = {bool: "bool", int: "int", float: "float", str: "str"}


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
class Option(Generic[T]):
    """A configuration option of a rule: its kebab-case `name` (the TOML key), the `type`
    of its values, its `default`, for a number the `range` it must lie in (a value
    outside it would silently turn the rule off or make its fix nonsense), and a one-line
    `doc` of what it sets."""

    name: str
    type: type[T]
    default: T
    range: Range | None
    doc: str

    def __post_init__(self) -> None:
        if self.type not in _KINDS:
            raise ValueError(f"option `{self.name}`: type must be bool, int, float or str")
        numeric = self.type in (int, float)
        if numeric and (self.range is None or self.range == (None, None)):
            raise ValueError(f"option `{self.name}`: a numeric option declares its range")
        if not numeric and self.range is not None:
            raise ValueError(f"option `{self.name}`: only a number has a range")
        if not self.doc:
            raise ValueError(f"option `{self.name}`: say what it sets in `doc`")
        problem = self.problem(self.default)
        if problem is not None:
            raise ValueError(f"option `{self.name}`: default {problem}")

    def problem(self, value: object) -> str | None:
        """Why `value` cannot be this option's value, in TOML's words; None if it can."""
        if type(value) is not self.type and not (self.type is float and type(value) is int):
            return f"must be {_KINDS[self.type]}, got {toml_value(value)}"
        if self.range is None or not isinstance(value, (int, float)):
            return None
        low, high = self.range
        outside = (low is not None and value < low) or (high is not None and value > high)
        return f"must be {self.bounds()}, got {toml_value(value)}" if outside else None

    def value(self, options: Mapping[str, object]) -> T:
        """This option's value in `options` (a run's, checked by the configuration), else
        its default."""
        found = options.get(self.name, self.default)
        problem = self.problem(found)
        if problem is not None:
            raise ValueError(f"`{self.name}` {problem}")
        if self.type is float and isinstance(found, int):
            found = float(found)
        return cast(T, found)

    def bounds(self) -> str:
        """`from 2 to 65536`, `at least 1`, `at most 8`; "" for an option without one."""
        low, high = self.range or (None, None)
        if low is not None and high is not None:
            return f"from {low} to {high}"
        if low is not None:
            return f"at least {low}"
        return f"at most {high}" if high is not None else ""

    def summary(self) -> str:
        """What a rule's page says of it: `` `min-batch-size` (int, default `32`, from 2
        to 65536): <doc>``."""
        bounds = f", {self.bounds()}" if self.range else ""
        kind = _TYPE_NAMES[self.type]
        return f"`{self.name}` ({kind}, default `{toml_value(self.default)}`{bounds}): {self.doc}"


def describe(declared: Iterable[Option[Any]], values: Mapping[str, object]) -> list[str]:
    """One TOML line per declared option, sorted by name: its effective value in `values`
    (a run's options), else its default, with its declaration as a comment; what
    `--show-settings` prints of the rules' options."""
    lines = []
    for option in sorted(declared, key=lambda o: o.name):
        value = values.get(option.name, option.default)
        bounds = f" {option.bounds()}" if option.range else ""
        lines.append(
            f"{option.name} = {toml_value(value)}  # {_TYPE_NAMES[option.type]}{bounds}, "
            f"default {toml_value(option.default)}: {option.doc}"
        )
    return lines


# The options rules declare, shared or not: the catalog (lint/catalog.py) names each by
# its name here.
TINY_NETWORK_BATCH_SIZE = Option(
    "tiny-network-batch-size",
    int,
    64,
    (2, 65536),
    "the batch size below which a network of under 1M parameters (counted from its layers)"
    " waits on per-step overhead, and what a fix raises it to",
)
MIN_BATCH_SIZE = Option(
    "min-batch-size",
    int,
    32,
    # A batch below 2 is no batch (TL002's fix writes the value), above 65536 no GPU holds.
    (2, 65536),
    "the batch size below which a training batch is small, and what a fix raises it to",
)
MIN_DECODING_WORKERS = Option(
    "min-decoding-workers",
    int,
    4,
    # At 2 only one worker decoding files is reported; no host has cores for 256.
    (2, 256),
    "the fewest DataLoader workers that keep a GPU fed where every sample decodes a file"
    " (one fewer where images already in memory are only augmented)",
)
