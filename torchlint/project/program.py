"""The whole program: the summaries of a project's files, linked.

Linking answers what no single file shows:
- what a name imported from another file is (following re-exports and star imports);
- what the calls of the whole project pass for each parameter (`parameter`): the join
  of every call site's value, following values that are themselves parameters (handed on
  from one function to the next) to a fixed point;
- how each function is called (`callers`): on every training step, on a GPU, again and
  again, with autograd off, under the main guard, through chains of calls;
- what the project does with each DataLoader and model site (`uses`): the loops of other
  files over it, and the effects of the functions it is passed to.
Each is computed once per program, in time linear in the summaries (chains are followed
with memoized, cycle-guarded recursion of bounded depth), and deterministically.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import cached_property

from torchlint.project.layout import Layout
from torchlint.semantic.external import (
    Call,
    Callers,
    Class,
    Environment,
    Export,
    Function,
    Summary,
    Uses,
)
from torchlint.semantic.portable import Value, join_values

MAX_DEPTH = 8  # re-exports followed; calls chained


@dataclass(frozen=True)
class _Edge:
    file: str  # the key of the file the call is in
    call: Call
    callee: Function
    source: Call  # the call as its file's summary holds it


Fetch = Callable[[str], Summary | None]
# file key -> (its summary, id(call) -> (the callee it ran, what it passes: parameter
# reference and value)): kept from one linking to the next while the summary is the same
Passing = dict[str, tuple[Summary, dict[int, tuple[Function, list[tuple[str, Value]]]]]]


class Program:
    """A project's summaries (file key -> Summary) and what linking them tells."""

    def __init__(
        self,
        layout: Layout,
        summaries: dict[str, Summary],
        fetch: Fetch | None = None,
        passing: Passing | None = None,
    ) -> None:
        self.layout = layout
        self.summaries = summaries
        # What each call passes, from the last linking (`Project` keeps it): linked again
        # after a file's summary changed, the project's other calls pass the same.
        self.passing: Passing = {} if passing is None else passing
        # Reads a file not summarized yet when a name it defines is asked about (a model
        # file no rule reads, say), so that the file asking gets its answer at once.
        self.fetch = fetch
        self.fetched: dict[str, Summary] = {}  # since last taken (`take_fetched`)
        self._tried: set[str] = set()
        self._parameters: dict[str, Value | None] = {}
        self._callers_of: dict[str, Callers | None] = {}

    # -- names -----------------------------------------------------------------------

    def export(self, importer: str, qualname: str, _depth: int = 0) -> Export | None:
        """What a name imported in `importer` is: a qualname as written there, or a
        reference ("pkg/data.py::build", "pkg/engine.py::Trainer.fit")."""
        if "::" in qualname:
            key, _, local = qualname.partition("::")
            return self._member(key, tuple(local.split(".")), _depth)
        found = self.layout.resolve(importer, qualname)
        if found is None:
            return None
        return self._member(found[0], found[1], _depth)

    def _summary(self, key: str) -> Summary | None:
        """The summary of a file of the project: known, or read on demand (`fetch`)."""
        summary = self.summaries.get(key)
        if summary is None and self.fetch is not None and key not in self._tried:
            self._tried.add(key)
            summary = self.fetch(key)
            if summary is not None:
                self.summaries[key] = self.fetched[key] = summary
        return summary

    def _member(self, key: str, attributes: tuple[str, ...], depth: int) -> Export | None:
        if not attributes or depth > MAX_DEPTH:
            return None
        summary = self._summary(key)
        head, rest = attributes[0], attributes[1:]
        found = summary.exports.get(head) if summary is not None else None
        if found is None:
            imported = None
            if summary is not None:
                imported = summary.imports.get(head) or self._starred(key, head)
            if imported is None:
                # Not read yet, or read as telling nothing (a package's `__init__.py` of
                # imports only): what its import statements re-export.
                source = self.layout.reexports(key).get(head)
                if source is None:
                    return None
                return self._member(source[0], source[1] + rest, depth + 1)
            return self.export(key, ".".join((imported, *rest)), depth + 1)
        for name in rest:
            if not isinstance(found, Class):
                return None
            method = found.method(name)
            if method is None:
                return None
            found = method
        return found

    def _starred(self, key: str, name: str) -> str | None:
        """The qualname `name` is bound to by a star import of the file."""
        summary = self.summaries[key]
        for module in summary.stars:
            for entry in self.star(key, module):
                local, _, target = entry.partition("=")
                if local == name:
                    base = module if module.endswith(".") else f"{module}."
                    return target or f"{base}{name}"
        return None

    def star(self, importer: str, module: str, _depth: int = 0) -> tuple[str, ...]:
        """The names `from module import *` binds in `importer`; a name the module imports
        as `name=its qualname` (`nn=torch.nn`: what it is, not where it was seen)."""
        found = self.layout.resolve(importer, module)
        if found is None or found[1] or _depth > MAX_DEPTH:
            return ()
        summary = self._summary(found[0])
        if summary is None:
            return ()
        imported = summary.imports
        names = [
            f"{n}={imported[n]}" if n in imported and not imported[n].startswith(".") else n
            for n in summary.names()
        ]
        if summary.public is None:
            for inner in summary.stars:
                names += self.star(found[0], inner, _depth + 1)
        return tuple(dict.fromkeys(names))

    # -- calls -------------------------------------------------------------------------

    @cached_property
    def _edges(self) -> dict[str, list[_Edge]]:
        """callee reference -> the calls that run it."""
        found: dict[str, list[_Edge]] = {}
        for key in sorted(self.summaries):
            for source in self.summaries[key].calls:
                call, callee = source, self.export(key, source.callee)
                if isinstance(callee, Class):  # `Net(...)` runs `__init__`
                    callee = callee.method("__init__")
                    call = replace(call, offset=call.offset + 1)
                if isinstance(callee, Function):
                    found.setdefault(callee.ref, []).append(_Edge(key, call, callee, source))
        return found

    @cached_property
    def _passed(self) -> dict[str, Value]:
        """parameter reference -> what the calls pass for it (parameters handed on still
        named in `params`)."""
        found: dict[str, list[Value]] = {}
        for edges in self._edges.values():
            for edge in edges:
                for param, value in self._told_arguments(edge):
                    found.setdefault(param, []).append(value)
        return {ref: v for ref, values in found.items() if (v := join_values(values))}

    def _told_arguments(self, edge: _Edge) -> list[tuple[str, Value]]:
        """What a call passes: the parameters of its callee it binds (references) and
        what each gets that tells something."""
        summary = self.summaries[edge.file]
        kept = self.passing.get(edge.file)
        if kept is None or kept[0] is not summary:
            kept = self.passing[edge.file] = (summary, {})
        known = kept[1].get(id(edge.source))
        if known is not None and known[0] is edge.callee:
            return known[1]
        ref = edge.callee.ref
        here = ref.partition("::")[0]
        found = []
        for name, value in _arguments(edge):
            if edge.file == here:  # the file sees its own calls: only what they hand on
                value = Value(params=value.params)  # from elsewhere
            if (told := value.telling()) is not None:
                found.append((f"{ref}:{name}", told))
        kept[1][id(edge.source)] = (edge.callee, found)
        return found

    def parameter(self, function: str, name: str) -> Value | None:
        """What the project passes for parameter `name` of `function` (a reference):
        parameters handed on resolved to what their own calls pass."""
        ref = f"{function}:{name}"
        if ref not in self._parameters:
            self._parameters[ref] = self._resolved(ref, frozenset())
        return self._parameters[ref]

    def _resolved(self, param: str, seen: frozenset[str]) -> Value | None:
        value = self._passed.get(param)
        if value is None or param in seen or len(seen) > MAX_DEPTH:
            return None
        inner = [self._resolved(p, seen | {param}) for p in sorted(value.params)]
        return join_values([value.without_params(), *inner]) or None

    def always_passed(self, function: str, name: str) -> bool:
        """Every call of the project to `function` (a reference) passes parameter `name`
        (or spreads `*`/`**` arguments that may): its default is not what they get."""
        edges = self._edges.get(function, [])
        return bool(edges) and all(_passes(edge, name) for edge in edges)

    def numbers_passed(self, function: str, name: str) -> bool:
        """Every call of the project to `function` (a reference) passes Python numbers for
        parameter `name` (its `**kwargs` collecting each keyword it does not name)."""
        edges = self._edges.get(function, [])
        return bool(edges) and all(_passes_numbers(edge, name) for edge in edges)

    def callers(self, function: str) -> Callers | None:
        """How the project calls `function` (a reference), through chains of calls."""
        if function not in self._callers_of:
            edges = self._edges.get(function)
            self._callers_of[function] = self._callers(function, frozenset()) if edges else None
        return self._callers_of[function]

    def _callers(self, function: str, seen: frozenset[str]) -> Callers:
        per_step = gpu = repeated = no_grad = False
        guarded = True
        places: list[tuple[bool, str]] = []  # (not per step, where): per-step calls first
        for edge in self._edges.get(function, ()):
            call = edge.call
            outer = None
            if call.caller is not None and len(seen) <= MAX_DEPTH:
                ref = f"{edge.file}::{call.caller}"
                if ref not in seen and ref in self._edges:
                    outer = self._callers(ref, seen | {function})
            per_step = per_step or call.per_step or bool(outer and outer.per_step)
            gpu = gpu or (call.per_step and call.gpu) or bool(outer and outer.gpu)
            repeated = repeated or call.repeated or bool(outer and outer.repeated)
            no_grad = no_grad or call.no_grad or bool(outer and outer.no_grad)
            guarded = guarded and (call.guarded or bool(outer and outer.guarded))
            places.append((not (call.per_step or bool(outer and outer.per_step)), call.where))
        return Callers(per_step, gpu, repeated, no_grad, guarded, min(places)[1] if places else "")

    # -- sites -----------------------------------------------------------------------

    @cached_property
    def _uses(self) -> dict[str, Uses]:
        """site reference -> what the project does with it."""
        found: dict[str, Uses] = {}

        def add(ref: str, uses: Uses) -> None:
            found[ref] = found[ref].join(uses) if ref in found else uses

        for key in sorted(self.summaries):
            for ref, uses in self.summaries[key].uses:
                add(ref, uses)
        for function in (
            f for key in sorted(self.summaries) for f in self.summaries[key].effectful
        ):
            for name, effect in function.effects:
                value = self.parameter(function.ref, name)
                if value is None:
                    continue
                callers = self._callers(function.ref, frozenset())
                gpu = effect.gpu or any(
                    (d := self.parameter(*p.rsplit(":", 1))) is not None
                    and d.device is not None
                    and d.device.is_gpu
                    for p in sorted(effect.devices)
                )
                uses = Uses(
                    effect.trains,
                    effect.steps,
                    effect.repeated or callers.repeated,
                    gpu,
                    effect.guarded or callers.guarded,
                    f"`{function.ref.partition('::')[2]}` in {function.ref.partition('::')[0]}",
                    effect.cpu,
                )
                for ref in sorted(value.loaders):
                    add(ref, uses)
                if value.network is not None and value.network.site is not None:
                    add(value.network.site, uses)
        return found

    def uses(self, site: str) -> Uses | None:
        """What the project does with a site, where it trains on it or puts it on a GPU."""
        found = self._uses.get(site)
        return found if found is not None and (found.trains or found.gpu) else None

    def stepped(self, key: str) -> tuple[tuple[str, str], ...]:
        """The functions of a file that other files of the project call on every step of
        training on a GPU (directly, or through functions of the file they call so):
        what the file's own calls do, its own analysis knows."""
        found = []
        for ref in self._called_in.get(key, ()):
            where = self._stepped_from_elsewhere(ref, frozenset())
            if where is not None:
                found.append((ref.partition("::")[2], where))
        return tuple(found)

    @cached_property
    def _called_in(self) -> dict[str, list[str]]:
        """file key -> the functions of the file the project calls, sorted."""
        found: dict[str, list[str]] = {}
        for ref in sorted(self._edges):
            found.setdefault(ref.partition("::")[0], []).append(ref)
        return found

    def _stepped_from_elsewhere(self, function: str, seen: frozenset[str]) -> str | None:
        """A call of another file running `function` on every GPU step (its place), or
        of a function of the same file run so."""
        here = function.partition("::")[0]
        places = []
        for edge in self._edges.get(function, ()):
            call = edge.call
            if edge.file != here and call.per_step and call.gpu:
                places.append(call.where)
            elif call.caller is not None and len(seen) <= MAX_DEPTH:
                ref = f"{edge.file}::{call.caller}"
                if ref not in seen:
                    outer = self._stepped_from_elsewhere(ref, seen | {function})
                    if outer is not None:
                        places.append(outer)
        return min(places) if places else None

    @cached_property
    def reached(self) -> set[str]:
        """The files the project tells something that could make a finding there even
        if they hold no token of a rule (or train nothing themselves): loaders and
        optimizers their functions are given, calls on every GPU step or with autograd
        off, what is done with the loaders and models they build."""
        found = {
            ref.partition("::")[0]
            for ref, v in self._passed.items()
            if v.loaders or v.optimizer is not None
        }
        per_step = self._chained(lambda call: call.per_step)
        gpu = self._chained(lambda call: call.per_step and call.gpu)
        no_grad = self._chained(lambda call: call.no_grad)
        found |= {ref.partition("::")[0] for ref in (per_step & gpu) | no_grad}
        sites = (ref for ref in self._uses if self.uses(ref) is not None)
        return found | {re.split(r"[#@]\d+$", ref)[0] for ref in sites}

    def _chained(self, test: Callable[[Call], bool]) -> set[str]:
        """The functions some call passing `test` runs, directly or through chains of at
        most MAX_DEPTH + 1 calls: what `callers` says of each, found at once (the shortest
        chains, from the calls that pass, down to what they call)."""
        found = {ref for ref, edges in self._edges.items() if any(test(e.call) for e in edges)}
        frontier = found
        for _ in range(MAX_DEPTH + 1):
            frontier = {
                callee for ref in frontier for callee in self._called_by.get(ref, ())
            } - found
            if not frontier:
                break
            found |= frontier
        return found

    @cached_property
    def _called_by(self) -> dict[str, set[str]]:
        """function reference -> the functions it calls (among those of `_edges`)."""
        found: dict[str, set[str]] = {}
        for ref, edges in self._edges.items():
            for edge in edges:
                if edge.call.caller is not None:
                    found.setdefault(f"{edge.file}::{edge.call.caller}", set()).add(ref)
        return found

    def reaches(self, key: str) -> bool:
        return key in self.reached

    def environment(self, key: str) -> ProgramEnvironment:
        return ProgramEnvironment(key, program=self)


def _arguments(edge: _Edge) -> Iterable[tuple[str, Value]]:
    """The parameters of the callee a call binds, with the values it passes (positional
    arguments stop at the first `*args`)."""
    call, callee = edge.call, edge.callee
    for index, value in enumerate(call.args):
        name = callee.parameter(index, None, call.offset)
        if name is not None and value is not None:
            yield name, value
    for keyword, value in call.kwargs:
        name = callee.parameter(None, keyword, call.offset)
        if name is not None:
            yield name, value


def _passes_numbers(edge: _Edge, name: str) -> bool:
    """What the call passes for parameter `name`, if anything, is Python numbers."""
    call, callee = edge.call, edge.callee
    if call.star:
        return False
    slots = [
        str(i) for i in range(len(call.args)) if callee.parameter(i, None, call.offset) == name
    ]
    slots += [k for k in call.keywords if callee.parameter(None, k, call.offset) == name]
    return all(slot in call.numbers for slot in slots)


def _passes(edge: _Edge, name: str) -> bool:
    call, callee = edge.call, edge.callee
    if call.star or name in call.keywords:
        return True
    return any(callee.parameter(i, None, call.offset) == name for i in range(len(call.args)))


class ProgramEnvironment(Environment):
    """One file's view of the program: what `Environment` asks, answered by linking."""

    def __init__(self, path: str, program: Program) -> None:
        super().__init__(path)
        self.program = program

    @property
    def reached(self) -> bool:
        assert self.path is not None
        return self.program.reaches(self.path)

    @property
    def linked(self) -> bool:
        return True

    def knows(self, qualname: str) -> bool:
        assert self.path is not None
        if "::" in qualname or qualname.startswith("."):
            return True
        return self.program.layout.module_exists(self.path, qualname.partition(".")[0])

    def _export(self, qualname: str) -> Export | None:
        assert self.path is not None
        return self.program.export(self.path, qualname)

    def _star(self, module: str) -> Iterable[str]:
        assert self.path is not None
        return self.program.star(self.path, module)

    def _parameter(self, function: str, name: str) -> Value | None:
        return self.program.parameter(self.ref(function), name)

    def _callers(self, function: str) -> Callers | None:
        return self.program.callers(self.ref(function))

    def _always_passed(self, function: str, name: str) -> bool:
        return self.program.always_passed(self.ref(function), name)

    def _numbers_passed(self, function: str, name: str) -> bool:
        return self.program.numbers_passed(self.ref(function), name)

    def _uses(self, site: str) -> Uses | None:
        return self.program.uses(self.site(site))

    def _stepped(self) -> tuple[tuple[str, str], ...]:
        assert self.path is not None
        return self.program.stepped(self.path)
