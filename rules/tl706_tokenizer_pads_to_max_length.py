"""TL706 tokenizer-pads-to-max-length: every sample is padded to the longest length allowed.

What: a Hugging Face tokenizer (a call or method of a name ending in `tokenizer`, or of
`AutoTokenizer.from_pretrained(...)`) asked to pad every sample to a fixed length:
`padding="max_length"` with a `max_length` that is a constant, a setting (a parameter,
an attribute) or left out (the model's limit), or the deprecated
`pad_to_max_length=True`; and a data set tokenized whole (`dataset.map(tokenize,
batched=True, batch_size=None)`) by a function of this file that pads (`padding=True` or
`"longest"`), which pads every sample to the longest of the whole data set. Left alone:
a `max_length` measured from the data (`max(len(...) ...)`: a collate function padding
to its batch's longest), code that runs on TPUs (XLA wants static shapes: a file
importing `torch_xla` or testing for `DistributedType.XLA`), and a CLIP tokenizer
(`CLIPTokenizer`, a model id naming CLIP, a diffusion checkpoint's
`subfolder="tokenizer"`): CLIP's text encoder was trained on 77-token padded prompts,
and a diffusion model is conditioned on every position, padding included.

Why: attention and feed-forward layers compute over every position, padding included:
a corpus of reviews of 200 tokens on average padded to 512 spends about 60% of the
model's work on padding, every step. Padding each batch to its own longest sample
(dynamic padding) keeps only what the batch needs; grouping samples of similar length
(`group_by_length=True` in the Trainer) cuts it further.

Bad:
    tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
    train_set = dataset.map(
        lambda b: tokenizer(b["text"], padding="max_length", truncation=True), batched=True
    )

Good:
    tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
    train_set = dataset.map(lambda b: tokenizer(b["text"], truncation=True), batched=True)
    collator = DataCollatorWithPadding(tokenizer)  # pads each batch to its longest

Fix: none offered: the padding moves to the collate step (`DataCollatorWithPadding`, or
the Trainer's default collator given the tokenizer), which code that expects tensors of
one fixed shape must follow.

Impact: high. Low where `max_length` is at most 64 tokens (short sequences: little
padding to remove).

Unknown device: padding costs work on any device; the rule does not read devices.

Sources: Transformers docs, "Padding and truncation" and "Preprocess"
(`DataCollatorWithPadding`: "dynamically pad the sentences to the longest length in a
batch"); `TrainingArguments.group_by_length`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from torchlint.results import Impact
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import (
    MISSING,
    CallSite,
    TorchModule,
    bool_value,
    contains,
    dotted_name,
    is_none,
    keyword,
    str_value,
)
from torchlint.text.walk import descendants

TOKENIZER = re.compile(r"tokeni[sz]er$", re.IGNORECASE)
SHORT = 64  # tokens: little padding to remove
PAD_METHODS = ("encode_plus", "batch_encode_plus", "pad", "__call__")


class TokenizerPadsToMaxLength(Rule):
    code = "TL706"
    name = "tokenizer-pads-to-max-length"
    tokens = ("max_length", "batch_size=None")

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        found = [*self._fixed(module), *self._whole_dataset(module)]
        # (the whole tree is searched for XLA only where there is something to report)
        if found and not module.imports_any("torch_xla") and not _tests_xla(module):
            yield from found

    def _fixed(self, module: TorchModule) -> Iterator[Diagnostic]:
        """Tokenizer calls that pad every sample to a fixed length."""
        for call in module.calls:
            fixed = _fixed_length(module, call)  # read the keywords before the tokenizer
            if fixed is None or not _tokenizer(module, call) or _clip(module, call):
                continue
            length, spelled = fixed
            short = length is not None and length <= SHORT
            yield self.diagnostic(
                call.node,
                f"the tokenizer pads every sample to {spelled}: attention and feed-forward "
                "layers compute over the padding of every batch; pad each batch to its "
                "longest sample instead (tokenize without padding, then "
                "`DataCollatorWithPadding(tokenizer)` or a collate function)"
                + (f" (low impact: sequences of at most {SHORT} tokens)" if short else ""),
                impact=Impact.LOW if short else Impact.HIGH,
            )

    def _whole_dataset(self, module: TorchModule) -> Iterator[Diagnostic]:
        """`ds.map(tokenize, batched=True, batch_size=None)` where `tokenize` pads."""
        for call in module.method_calls("map"):
            node = call.node
            size = keyword(node, "batch_size")
            if not is_none(size):
                continue
            if bool_value(keyword(node, "batched")) is not True or not node.args:
                continue
            function = _function(module, call, node.args[0].value)
            if function is None or not any(
                _pads(c) and _tokenizer(module, c) for c in module.calls if _inside(c, function)
            ):
                continue
            yield self.diagnostic(
                node,
                "the data set is tokenized in one batch (`batch_size=None`) by a function "
                "that pads: every sample is padded to the longest of the whole data set, "
                "and attention and feed-forward layers compute over that padding every "
                "step; tokenize without padding and pad each batch to its longest "
                "(`DataCollatorWithPadding(tokenizer)`)",
            )


def _tests_xla(module: TorchModule) -> bool:
    """The file reads `DistributedType.XLA` (it runs on TPUs too: static shapes)."""
    return any(
        isinstance(n, cst.Attribute) and n.attr.value == "XLA" for n in descendants(module.module)
    )


def _tokenizer(module: TorchModule, call: CallSite) -> bool:
    """The call runs a tokenizer: `tokenizer(...)`, `self.tokenizer.encode_plus(...)`,
    or a name bound to `AutoTokenizer.from_pretrained(...)`."""
    func = call.node.func
    target = func.value if isinstance(func, cst.Attribute) and call.method in PAD_METHODS else func
    name = dotted_name(target) or ""
    if TOKENIZER.search(name.rpartition(".")[2]):
        return True
    if not isinstance(target, (cst.Name, cst.Attribute)):
        return False
    return any(
        isinstance(v, cst.Call) and "Tokenizer" in (dotted_name(v.func) or "")
        for v, _ in module.values.origins(target, call.scope)
    )


def _clip(module: TorchModule, call: CallSite) -> bool:
    """A CLIP tokenizer (`CLIPTokenizer.from_pretrained(...)`, a model id naming CLIP,
    or a diffusion checkpoint's `subfolder="tokenizer"`): its text encoder was trained
    on 77-token padded prompts, and a diffusion model is conditioned on every position,
    padding included; a shorter padding changes what it generates."""
    func = call.node.func
    target = func.value if isinstance(func, cst.Attribute) and call.method in PAD_METHODS else func
    if not isinstance(target, (cst.Name, cst.Attribute)):
        return False
    for value, _ in module.values.origins(target, call.scope):
        if not isinstance(value, cst.Call):
            continue
        made = dotted_name(value.func) or ""
        named = " ".join(str_value(a.value) or "" for a in value.args).lower()
        if "CLIP" in made or "clip" in named or "tokenizer" in named.split():
            return True
    return False


def _pads(call: CallSite) -> bool:
    """Asked to pad (to the longest of what it is given)."""
    padding = keyword(call.node, "padding")
    return bool_value(padding) is True or str_value(padding) in ("longest", "max_length")


def _fixed_length(module: TorchModule, call: CallSite) -> tuple[int | None, str] | None:
    """(the length, as the message says it) where every sample is padded to a fixed
    length: `padding="max_length"` or `pad_to_max_length=True`, with a constant (or no)
    `max_length`; None otherwise."""
    node = call.node
    asked = str_value(keyword(node, "padding")) == "max_length"
    asked = asked or bool_value(keyword(node, "pad_to_max_length")) is True
    if not asked:
        return None
    given = keyword(node, "max_length")
    if given is MISSING:
        return None, "the model's maximum length"
    found = module.values.constant(given, call.scope)
    if found is not None and isinstance(found.value, int) and not isinstance(found.value, bool):
        return found.value, f"`max_length` ({found.value} tokens)"
    origins = [given, *(v for v, _ in module.values.origins(given, call.scope))]
    if any(_measured(v) for v in origins):
        return None  # the longest of the batch: `max(len(e["input_ids"]) for e in batch)`
    return None, f"`max_length` (`{module.module.code_for_node(given)}`)"


def _measured(node: cst.CSTNode) -> bool:
    """A length computed from the data (`max(...)`, `len(...)`)."""
    return any(
        isinstance(n, cst.Call) and dotted_name(n.func) in ("max", "min", "len")
        for n in descendants(node)
    )


def _function(
    module: TorchModule, call: CallSite, node: cst.BaseExpression
) -> cst.FunctionDef | cst.Lambda | None:
    """The function of this file (or the lambda) a `map` is given."""
    if isinstance(node, cst.Lambda):
        return node
    binding = module.functions.definition(node, call.scope)
    if binding is not None and isinstance(binding.node, cst.FunctionDef):
        return binding.node
    return None


def _inside(call: CallSite, function: cst.FunctionDef | cst.Lambda) -> bool:
    if isinstance(function, cst.FunctionDef):
        return call.ctx.function is function
    return contains(function, call.node)
