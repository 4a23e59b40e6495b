"""TL609 generation-without-kv-cache: each new token reruns the model on the whole sequence.

What: a `for`/`while` loop that calls a network on a growing sequence `X` (the tokens
themselves, a window of them, `X[:, -block_size:]`, or a name bound to one in the loop)
and appends to `X`, in the same body, what it chose from that call's output:
`X = torch.cat((X, next_id), dim=1)` (or `torch.cat([X, next_id], -1)`, `torch.concat`),
`next_id` taken from the output through any steps (`logits[:, -1, :]`, a softmax,
`argmax`, `torch.multinomial`, `topk`). The network is one the file builds or loads
(`from_pretrained`, an instance of an `nn.Module` subclass, the module's own `self(...)`
in a sampling method), a submodule of one (`model.decode(...)`), or a parameter of the
function that no call of the file passes anything else to. Also `.generate(...,
use_cache=False)`. Left alone: a loop whose call hands the model what it kept of
earlier steps (`past_key_values`, `past`, `layer_past`, `cache`, `kv_cache`, a hidden
state, `start_pos`): already incremental; a loop that feeds only the last token
(`X[:, -1:]`, `X[:, -1]`) or the tokens from a position that moves (`X[:, pos:]`); a
network rebound in the loop (DenseNet's `for layer in layers:` concatenating features);
a concatenation of something the model is not fed (outputs collected for logging), or
along dimension 0 (a batch that grows); `.generate(use_cache=False)` in a training loop
of a file that turns gradient checkpointing on (the cache is off while it trains).

Why: a decoder's attention reads the keys and values of every earlier position. Run on
the whole sequence, the model recomputes all of them for each new token: the work for
`n` new tokens grows with `n` squared, where a key-value cache computes each position
once and runs each step on one token (a matrix-vector product per layer instead of a
matrix product over the sequence). Hugging Face models keep that cache
(`past_key_values`, what `model.generate` uses); a model written by hand keeps one only
where its attention layers are written to.

Bad:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained("gpt2").cuda().eval()
    idx = torch.tensor([[50256]], device="cuda")
    with torch.no_grad():
        for _ in range(100):
            logits = model(idx).logits
            next_id = logits[:, -1, :].argmax(-1, keepdim=True)
            idx = torch.cat((idx, next_id), dim=1)

Good:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained("gpt2").cuda().eval()
    idx = torch.tensor([[50256]], device="cuda")
    with torch.no_grad():
        idx = model.generate(idx, max_new_tokens=100, do_sample=False)

Fix: none offered. The rewrite depends on the model's API: `model.generate(...)` takes
the sampling options the loop writes by hand (temperature, top-k, stopping) under its
own names; a loop kept by hand passes `past_key_values=out.past_key_values` and only
the new token, with an attention mask and positions that must follow; a model of the
file needs a cache written into its attention layers first.

Impact: high where the model keeps a cache the loop could use: a Hugging Face model
(`from_pretrained` of an `Auto*`, `...ForCausalLM`, `...ForConditionalGeneration`,
`...LMHeadModel` class, or a call that passes `use_cache=False`), or a module of the
file whose `forward` (or the method called) takes one (`past_key_values`, `kv_cache`,
`hidden`). Low where the model keeps none, or none is known: a module written in the
file without one (minGPT, nanoGPT) or a `torch.nn` layer (`nn.TransformerDecoder`): the
loop cannot use a cache until one is written; a model passed in, whose cache (if any)
the file does not show.

Unknown device: not read. The recomputation costs on every device, a CPU included.

Sources: Hugging Face Transformers docs, "Generation strategies" and "Caching" (the KV
cache, `past_key_values`, `use_cache`); Pope et al., "Efficiently Scaling Transformer
Inference" (incremental decoding with a key-value cache).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from torchlint.results import Impact
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import (
    MISSING,
    Binding,
    CallSite,
    Kind,
    Loop,
    ModelSite,
    Scope,
    TorchModule,
    bool_value,
    contains,
    dotted_name,
    int_value,
    names_read,
)

CAT = ("torch.cat", "torch.concat", "torch.concatenate")
USE_CACHE = "use_cache"
# What hands a model what it kept of earlier steps: a key-value cache (`past_key_values`,
# `layer_past`, `kv_cache`), a recurrent state (`hidden`, `h`), or the position a model
# with a cache of its own goes on from (`start_pos`).
CARRIED = re.compile(r"past|cache|hidden|state|^h[nx0-9]?$|^(start|input|cur)_pos$")
# Methods that hand on the same tokens.
SAME = frozenset({"to", "cuda", "long", "int", "contiguous", "clone", "detach", "type"})
# Hugging Face classes whose models keep a key-value cache (decoders)...
HF_DECODER = re.compile(
    r"(ForCausalLM|ForConditionalGeneration|LMHeadModel|ForSeq2SeqLM|ForVision2Seq"
    r"|ForImageTextToText|ForSpeechSeq2Seq)$"
)
# ... and the Auto classes whose models do not (encoders and their heads).
HF_ENCODER = re.compile(
    r"Masked|Classification|QuestionAnswering|MultipleChoice|NextSentence|PreTraining"
    r"|Processor|Tokenizer|Config|Backbone"
)
HF_WAY = (
    "use `model.generate(...)`, or pass `past_key_values=out.past_key_values` (and "
    "`use_cache=True`) with only the new token as input"
)
UNKNOWN = (
    "the model comes from elsewhere, not known to keep a key-value cache (a Hugging Face "
    "model does, `past_key_values`; one written by hand usually does not)"
)


@dataclass(frozen=True)
class Growth:
    """`X = torch.cat((X, new), dim=1)` in a loop's body: the sequence and what it gains."""

    binding: Binding
    name: str
    pieces: tuple[cst.BaseExpression, ...]
    dim: int


@dataclass(frozen=True)
class Cache:
    """How the loop could use the model's key-value cache (`way`), or why it cannot
    (`why`: the model keeps none, or none is known)."""

    way: str | None
    why: str = ""


class GenerationWithoutKvCache(Rule):
    code = "TL609"
    name = "generation-without-kv-cache"
    tokens = ("cat(", "concat", USE_CACHE)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        found: dict[int, Diagnostic] = {}
        for loop in module.loops:  # outer loops first: an inner loop's finding replaces
            for call, growth, cache in _recomputed(module, loop):
                found[id(call.node)] = self._finding(module, call, growth, cache)
        yield from found.values()
        yield from self._generate(module)

    def _finding(
        self, module: TorchModule, call: CallSite, growth: Growth, cache: Cache
    ) -> Diagnostic:
        x = growth.name
        message = (
            f"`{_spelled(module, call.node)}` runs the model over all of `{x}` again at "
            f"every step, and `{x}` grows by what the step takes from its output (`{x} = "
            f"{_spelled(module, growth.binding.value)}`): each new token recomputes the "
            "keys and values of every earlier position, work that grows with the square "
            "of the length"
        )
        if cache.way is not None:
            message += f"; the model keeps a key-value cache: {cache.way}"
            return self.diagnostic(call.node, message)
        message += (
            "; a key-value cache computes each position once and runs each step on the "
            f"new token only (low impact: {cache.why})"
        )
        return self.diagnostic(call.node, message, impact=Impact.LOW)

    def _generate(self, module: TorchModule) -> Iterator[Diagnostic]:
        """`.generate(..., use_cache=False)`, unless it runs in the training of a model
        with gradient checkpointing (which turns the cache off while it trains)."""
        calls = [
            c for c in module.method_calls("generate") if bool_value(c.kwarg(USE_CACHE)) is False
        ]
        if not calls or not module.imports_any("torch", "transformers"):
            return
        checkpointing = _checkpointing(module)
        for call in calls:
            if checkpointing and _training(module, call):
                continue
            yield self.diagnostic(
                call.node,
                "`.generate(..., use_cache=False)` runs the model on the whole sequence for "
                "every new token: each step recomputes the keys and values of every earlier "
                "position, work that grows with the square of the length; leave the "
                "key-value cache on (drop `use_cache=False`)",
            )


def _recomputed(module: TorchModule, loop: Loop) -> Iterator[tuple[CallSite, Growth, Cache]]:
    """The calls of a network on a sequence the loop grows by what the call chose."""
    growths = _growths(module, loop)
    if not growths:
        return
    values = _values(loop)
    for call in loop.calls:
        if _rebound(call, loop):
            continue
        for growth in growths:
            fed = [a for a in call.node.args if _feeds(a.value, growth, values, 0)]
            if not fed or _carries(call, fed):
                continue
            if not _chosen(call, growth, loop):
                continue
            cache = _cache(module, call)
            if cache is not None:
                yield call, growth, cache
                break


def _growths(module: TorchModule, loop: Loop) -> list[Growth]:
    """`X = torch.cat((X, new), dim=1)` (or -1) in the loop's body."""
    found = []
    for b in loop.assignments:
        value, name = b.value, b.symbol.name
        if b.kind is not Kind.ASSIGN or not isinstance(value, cst.Call) or "." in name:
            continue
        site = module.functions.site(value)
        if site is None or site.qualname not in CAT:
            continue
        dim = site.arg("dim", ("tensors", "dim"))
        if dim is MISSING:  # `torch.concatenate(tensors, axis=1)`
            dim = site.arg("axis")
        known = module.values.constant(dim, site.scope)
        number = int_value(dim)
        if number is None and known is not None and isinstance(known.value, int):
            number = known.value
        tensors = site.arg("tensors", ("tensors",))
        if number not in (1, -1) or not isinstance(tensors, (cst.Tuple, cst.List)):
            continue
        items = [e.value for e in tensors.elements if not isinstance(e, cst.StarredElement)]
        own = [i for i in items if isinstance(i, cst.Name) and i.value == name]
        if len(own) == 1 and len(items) >= 2:
            pieces = tuple(i for i in items if i is not own[0])
            found.append(Growth(b, name, pieces, number))
    return found


def _values(loop: Loop) -> dict[str, list[cst.BaseExpression]]:
    """The values the loop's body binds to each name."""
    found: dict[str, list[cst.BaseExpression]] = {}
    for b in loop.assignments:
        if b.kind is Kind.ASSIGN and b.value is not None:
            found.setdefault(b.symbol.name, []).append(b.value)
    return found


def _feeds(
    node: cst.BaseExpression,
    growth: Growth,
    values: dict[str, list[cst.BaseExpression]],
    depth: int,
) -> bool:
    """`node` holds the sequence, or a window of it that grows with it (not its last
    token, nor the tokens from a position that moves)."""
    if isinstance(node, cst.Name):
        if node.value == growth.name:
            return True
        bound = values.get(node.value, []) if depth < 4 else []
        return any(_feeds(v, growth, values, depth + 1) for v in bound)
    if isinstance(node, cst.IfExp):  # `idx if idx.size(1) <= n else idx[:, -n:]`
        return any(_feeds(v, growth, values, depth) for v in (node.body, node.orelse))
    if isinstance(node, cst.Subscript):
        return _window(node, growth.dim) and _feeds(node.value, growth, values, depth)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        same = node.func.attr.value in SAME
        return same and _feeds(node.func.value, growth, values, depth)
    return False


def _window(node: cst.Subscript, dim: int) -> bool:
    """The subscript keeps the sequence's dimension growing: whole (`X[:, :]`, absent),
    from a fixed start (`X[:, 1:]`) or a window at its end (`X[:, -block_size:]`);
    not one position (`X[:, -1]`), the last token (`X[:, -1:]`), nor the tokens from a
    position held in a name (`X[:, start:]`, which moves with the sequence)."""
    elements = list(node.slice)
    ellipsis = any(
        isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.Ellipsis) for e in elements
    )
    if dim == -1 or ellipsis:
        element = elements[-1]
    elif len(elements) > dim:
        element = elements[dim]
    else:
        return True
    index = element.slice
    if not isinstance(index, cst.Slice):
        return isinstance(index, cst.Index) and isinstance(index.value, cst.Ellipsis)
    lower = index.lower
    if lower is None:
        return True
    number = int_value(lower)
    if number is not None:
        return number != -1
    return not isinstance(lower, (cst.Name, cst.Attribute))


def _chosen(call: CallSite, growth: Growth, loop: Loop) -> bool:
    """What the sequence gains is computed from the call's output (through the names the
    loop's body binds)."""
    derived: set[str] = set()
    sources = [
        (b.symbol.name, v, set(names_read(v)), contains(v, call.node))
        for b in loop.assignments
        if b is not growth.binding and (v := b.value or b.source) is not None
    ]
    changed = True
    while changed:
        changed = False
        for name, _, reads, direct in sources:
            if name not in derived and (direct or reads & derived):
                derived.add(name)
                changed = True
    return any(
        contains(piece, call.node) or set(names_read(piece)) & derived for piece in growth.pieces
    )


def _carries(call: CallSite, fed: list[cst.Arg]) -> bool:
    """The call hands the model what it kept of earlier steps (a cache, a state) beside
    the tokens it is `fed` (whatever their names: `states`, `h`)."""
    for arg in call.node.args:
        if arg.keyword is not None and arg.keyword.value == USE_CACHE:
            continue
        if arg.keyword is not None and CARRIED.search(arg.keyword.value):
            return True
        if any(arg is f for f in fed):
            continue
        for name in names_read(arg.value):
            last = name.rpartition(".")[2]
            if last != USE_CACHE and CARRIED.search(last):
                return True
    return False


def _rebound(call: CallSite, loop: Loop) -> bool:
    """The callee is rebound in the loop (`for layer in self.layers:`): another module
    each time, not a model run again."""
    root = (dotted_name(call.node.func) or "").partition(".")[0]
    target = loop.node.target if isinstance(loop.node, cst.For) else None
    own = set(names_read(target)) if target is not None else set()
    return not root or root in loop.bound or root in own


def _cache(module: TorchModule, call: CallSite) -> Cache | None:
    """How the model a call runs keeps a key-value cache; None where it is no network."""
    if bool_value(call.kwarg(USE_CACHE)) is False:
        return Cache(HF_WAY)
    func = call.node.func
    own = module.models.called_on_itself(call)
    if own is not None:
        return _own(own, "forward")
    site = module.models.called(call)
    if site is None:
        return _parameter(module, call)
    if not site.is_network:
        return None
    if isinstance(site, ModelSite):
        construction = site.construction
        qualname = construction.qualname or ""
        if _hugging_face(qualname):
            return Cache(HF_WAY)
        cls = module.functions.class_scope(construction.node.func, construction.scope)
        if cls is not None:  # `model(x)`, or a method of it run alone: `model.decode(x)`
            method = "forward"
            if isinstance(func, cst.Attribute) and module.models.of(func, call.scope) is None:
                method = func.attr.value
            return _own(cls, method)
        if qualname.startswith("torch.nn."):
            short = qualname.rpartition(".")[2]
            return Cache(None, f"`nn.{short}` keeps no key-value cache")
        return Cache(None, UNKNOWN)
    external = site.external
    if external is not None and _hugging_face(external.cls or ""):
        return Cache(HF_WAY)
    return Cache(None, UNKNOWN)


def _hugging_face(qualname: str) -> bool:
    """A Hugging Face decoder, whose models keep a key-value cache."""
    if not qualname.startswith("transformers."):
        return False
    parts = qualname.split(".")
    cls = parts[-2] if parts[-1] == "from_pretrained" and len(parts) > 2 else parts[-1]
    if cls.startswith("Auto"):
        return not HF_ENCODER.search(cls)
    return bool(HF_DECODER.search(cls))


def _own(cls: Scope, method: str) -> Cache:
    """A module of this file: the cache its `forward` (or the method called) takes."""
    node = cls.node
    assert isinstance(node, cst.ClassDef)
    for base in node.bases:
        if cls.parent is not None and _hugging_face(cls.parent.resolve(base.value) or ""):
            return Cache(HF_WAY)
    member = cls.member(method)
    binding = member.only(Kind.DEF) if member is not None else None
    if binding is not None and isinstance(binding.node, cst.FunctionDef):
        params = binding.node.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            name = param.name.value
            if name != USE_CACHE and CARRIED.search(name):
                return Cache(
                    f"pass `{name}` (what the previous step returned) with only the new "
                    "token as input"
                )
    return Cache(
        None,
        f"`{node.name.value}`, a module of this file, keeps no key-value cache: the loop "
        "can use one only once it is written into its attention layers",
    )


def _parameter(module: TorchModule, call: CallSite) -> Cache | None:
    """A parameter of the function, called as a model, that no call of the file passes:
    a network passed in, not known to keep a cache."""
    func = call.node.func
    if not isinstance(func, cst.Name):
        return None
    symbol = call.scope.lookup(func.value)
    param = symbol.only(Kind.PARAM) if symbol is not None else None
    if param is None or module.functions.arguments(param):
        return None
    return Cache(None, UNKNOWN)


def _checkpointing(module: TorchModule) -> bool:
    """The file turns gradient checkpointing on."""
    if module.method_calls("gradient_checkpointing_enable"):
        return True
    return any(
        bool_value(c.kwarg("gradient_checkpointing")) is True for c in module.calls if c.node.args
    )


def _training(module: TorchModule, call: CallSite) -> bool:
    """The call runs as part of training: in a training loop, or every step."""
    return any(loop.is_training for loop in call.ctx.loops) or module.runs.per_step(call.ctx)


def _spelled(module: TorchModule, node: cst.CSTNode | None) -> str:
    if node is None:
        return "..."
    text = module.module.code_for_node(node)
    return text if len(text) <= 48 and "\n" not in text else text[:44].split("\n")[0] + "..."
