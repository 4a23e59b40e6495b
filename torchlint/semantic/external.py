"""What one file's analysis may know of the rest of its program, as plain data.

The project layer (`torchlint/project/`) answers through an `Environment`: what a name
imported from another file of the project is (`Class`, `Function`, or a module-level
`Value`), what the other files pass for a parameter of this file's functions, how they
call those functions (`Callers`) and what they do with the DataLoaders and models this
file builds (`Uses`). A file checked on its own gets `ALONE`, which knows nothing.

Every answer an environment gives is recorded, as plain data, under its question (a
`Question`, in `Environment.answers`): a result computed from a file's text and those
answers holds as long as the answers do, which is how the project layer knows what to
check again after an edit.

References name things across files: `"pkg/data.py::build"` a function or class
(`"pkg/engine.py::Trainer.fit"` a method), `"pkg/data.py#0"` the first DataLoader of
the file, `"pkg/train.py@2"` its third model, `"pkg/engine.py::train:device"` a
parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, ClassVar

from torchlint.results import Answers, Question
from torchlint.semantic.lattice import ModelKind
from torchlint.semantic.portable import Effect, Network, Value, plain


@dataclass(frozen=True)
class Function:
    """A function (or method) of another file: its parameters and what a call does."""

    ref: str
    params: tuple[str, ...]  # positional parameters in order (the instance first)
    keywords: frozenset[str] = frozenset()  # keyword-only parameters
    method: bool = False  # called on an instance: the instance is the first parameter
    steps: bool = False  # each call runs an optimizer step (outside a loop of its own)
    backward: bool = False  # each call runs a backward pass
    syncs: bool = False  # reads tensors on the host (`.item()`, `.cpu()`...): who calls it?
    returns: Value | None = None
    unpacked: tuple[Value | None, ...] = ()  # each element, where it returns a tuple
    # ... where its tuples differ in length by a flag (`return train, test` or `return
    # train, valid, test`): each length's elements, for a caller unpacking that many
    arities: tuple[tuple[Value | None, ...], ...] = ()
    yields: int | None = None  # a generator handing on the items of its parameter #i
    effects: tuple[tuple[str, Effect], ...] = ()  # parameter name -> what it does with it
    saves: tuple[str, ...] = ()  # parameters it hands `torch.save` as the path
    wraps: str | None = None  # what every `return` wraps a parameter in (`return DDP(model)`)
    varkw: str | None = None  # its `**kwargs` parameter: what other keywords bind
    kind: ClassVar[str] = "function"

    def parameter(self, index: int | None, keyword: str | None, offset: int) -> str | None:
        """The parameter an argument binds (`index`-th positional, or `keyword`), for a
        call that passes the first `offset` parameters implicitly (the instance)."""
        if keyword is not None:
            return keyword if keyword in self.params or keyword in self.keywords else self.varkw
        if index is None or index + offset >= len(self.params):
            return None
        return self.params[index + offset]

    @property
    def telling(self) -> bool:
        """It tells a caller something (a file that calls it needs its summary)."""
        returns = (self.returns, *self.unpacked, *(v for t in self.arities for v in t))
        return (
            self.steps
            or self.backward
            or self.syncs
            or self.yields is not None
            or bool(self.effects)
            or bool(self.saves)
            or any(v is not None and v.telling() is not None for v in returns)
        )

    def returned(self, element: int | None, arity: int | None = None) -> Value | None:
        """What a call returns (the `element`-th of the tuple it returns, to a caller
        that unpacks `arity` names, where known)."""
        if element is None:
            return self.returns
        values = self.unpacked or next((t for t in self.arities if len(t) == arity), ())
        return values[element] if 0 <= element < len(values) else None

    def to_json(self) -> dict[str, Any]:
        data = plain(self)
        data["params"] = list(self.params)
        data["keywords"] = sorted(self.keywords)
        data["returns"] = self.returns.to_json() if self.returns is not None else None
        data["unpacked"] = _values_json(self.unpacked)
        data["arities"] = [_values_json(t) for t in self.arities]
        data["effects"] = [[n, e.to_json()] for n, e in self.effects]
        data["saves"] = list(self.saves)
        data["kind"] = self.kind
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Function:
        data = {k: v for k, v in data.items() if k != "kind"}
        returns = data["returns"]
        return cls(
            **{
                **data,
                "params": tuple(data["params"]),
                "keywords": frozenset(data["keywords"]),
                "returns": Value.from_json(returns) if returns is not None else None,
                "unpacked": _values(data["unpacked"]),
                "arities": tuple(_values(t) for t in data["arities"]),
                "effects": tuple((n, Effect.from_json(e)) for n, e in data["effects"]),
                "saves": tuple(data["saves"]),
            }
        )


def _values_json(values: tuple[Value | None, ...]) -> list[Any]:
    return [v.to_json() if v is not None else None for v in values]


def _values(data: list[Any]) -> tuple[Value | None, ...]:
    return tuple(Value.from_json(v) if v is not None else None for v in data)


@dataclass(frozen=True)
class Dataset:
    """A Dataset class, as the data-loading rules judge it."""

    per_sample: bool = False  # `__getitem__` visibly works per sample (reads, decodes)
    plain: bool = False  # `__getitem__` calls nothing (tensors in memory)
    sized: bool = False  # defines `__len__`
    iterable: bool = False  # an IterableDataset
    text: bool = False  # `__getitem__` returns strings only (`samples.text_samples`)
    decodes: str | None = None  # the decoder it reads each sample with (`samples.Decoding`)

    def to_json(self) -> dict[str, Any]:
        return plain(self)


@dataclass(frozen=True)
class Class:
    """A class of another file: an nn.Module (and what it is like), an optimizer or a
    wrapper holding one, a Dataset, and its methods."""

    ref: str
    module: ModelKind | None = None  # an nn.Module of this kind
    optimizer: bool = False  # an optimizer, or a class holding one (its methods step it)
    layers: frozenset[str] = frozenset()
    parameters: int | None = None
    sequence_first: bool = False
    frozen: bool = False  # its methods set or test its parameters' `requires_grad`
    dataset: Dataset | None = None
    loader: bool = False  # a DataLoader subclass taking DataLoader's arguments
    own_iteration: bool = False  # ... that iterates its own way (`loader_classes.py`)
    methods: tuple[tuple[str, Function], ...] = ()
    kind: ClassVar[str] = "class"

    def method(self, name: str) -> Function | None:
        """The class's method `name`; calling an nn.Module (`__call__`, none of its own)
        runs its `forward`."""
        found = next((f for n, f in self.methods if n == name), None)
        if found is None and name == "__call__" and self.module is not None:
            return self.method("forward")
        return found

    @property
    def telling(self) -> bool:
        """It tells a file that uses it something (an nn.Module, an optimizer, a Dataset,
        a DataLoader, or a method that does)."""
        return (
            self.module is not None
            or self.optimizer
            or self.loader
            or self.dataset is not None
            or any(f.telling for _, f in self.methods)
        )

    def network(self) -> Network | None:
        """What an instance of the class is, when it is an nn.Module."""
        if self.module is None:
            return None
        return Network(
            self.module,
            cls=self.ref,
            layers=self.layers,
            parameters=self.parameters,
            sequence_first=self.sequence_first,
            frozen=self.frozen,
        )

    def to_json(self) -> dict[str, Any]:
        data = plain(self)
        data["module"] = self.module.value if self.module is not None else None
        data["layers"] = sorted(self.layers)
        data["dataset"] = self.dataset.to_json() if self.dataset is not None else None
        data["methods"] = [[n, f.to_json()] for n, f in self.methods]
        data["kind"] = self.kind
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Class:
        data = {k: v for k, v in data.items() if k != "kind"}
        dataset = data["dataset"]
        return cls(
            **{
                **data,
                "module": ModelKind(data["module"]) if data["module"] is not None else None,
                "layers": frozenset(data["layers"]),
                "dataset": Dataset(**dataset) if dataset is not None else None,
                "methods": tuple((n, Function.from_json(f)) for n, f in data["methods"]),
            }
        )


@dataclass(frozen=True)
class Global:
    """A module-level value of another file (`device = torch.device("cuda")`)."""

    ref: str
    value: Value
    kind: ClassVar[str] = "value"
    telling: ClassVar[bool] = True  # only values that tell something are exported

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "ref": self.ref, "value": self.value.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Global:
        return cls(data["ref"], Value.from_json(data["value"]))


Export = Class | Function | Global
_EXPORTS: dict[str, type[Export]] = {"class": Class, "function": Function, "value": Global}


def export_from_json(data: dict[str, Any]) -> Export:
    return _EXPORTS[data["kind"]].from_json(data)


@dataclass(frozen=True)
class Callers:
    """How the other files of the project call a function of this file."""

    per_step: bool = False  # some call runs on every training step (not every N steps)
    gpu: bool = False  # ... of training on a GPU
    repeated: bool = False  # some call runs again and again (in a loop: epochs)
    no_grad: bool = False  # some call runs with autograd off
    guarded: bool = False  # every call runs under `if __name__ == "__main__":`
    where: str = ""  # one caller, for messages ("`train_one_epoch` in pkg/engine.py")

    def to_json(self) -> dict[str, Any]:
        return plain(self)


@dataclass(frozen=True)
class Uses:
    """What the other files do with a DataLoader or a model this file builds."""

    trains: bool = False  # a training loop of theirs iterates it / calls it
    steps: bool = False  # ... once per optimizer step
    repeated: bool = False  # iterated again and again (every epoch)
    gpu: bool = False  # the batches, or the model, go to a GPU there
    guarded: bool = False  # every loop over it runs under `if __name__ == "__main__":`
    where: str = ""
    cpu: bool = False  # every loop over it there runs on the CPU (a CPU half of a notebook)

    def join(self, other: Uses) -> Uses:
        return Uses(
            self.trains or other.trains,
            self.steps or other.steps,
            self.repeated or other.repeated,
            self.gpu or other.gpu,
            self.guarded and other.guarded,
            # Where to point the user: a loop that trains on it first.
            self.where if self.where and (self.trains or not other.trains) else other.where,
            self.cpu and other.cpu,
        )

    def to_json(self) -> dict[str, Any]:
        return plain(self)


@dataclass(frozen=True)
class Call:
    """A call of this file into another file of the project, for linking: what it
    passes, and in what context it runs."""

    callee: str  # a reference ("pkg/engine.py::train"), or a qualname as imported here
    caller: str | None  # the function of this file it is in (its dotted name), else None
    args: tuple[Value | None, ...] = ()
    kwargs: tuple[tuple[str, Value], ...] = ()
    keywords: tuple[str, ...] = ()  # every keyword it passes, what it passes told or not
    star: bool = False  # `*args`/`**kwargs`: the rest cannot be mapped
    offset: int = 0  # leading parameters passed implicitly (1: the instance)
    per_step: bool = False  # runs on every training step
    gpu: bool = False  # ... of training on a GPU
    repeated: bool = False  # in a loop
    no_grad: bool = False  # with autograd off
    guarded: bool = False  # under `if __name__ == "__main__":`
    where: str = ""
    # The arguments that are Python numbers (`loss=loss.item()`, a learning rate): the
    # positions ("0") and keywords that pass one.
    numbers: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = plain(self)
        data["args"] = [a.to_json() if a is not None else None for a in self.args]
        data["kwargs"] = [[k, v.to_json()] for k, v in self.kwargs]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Call:
        return cls(
            **{
                **data,
                "args": tuple(Value.from_json(a) if a is not None else None for a in data["args"]),
                "kwargs": tuple((k, Value.from_json(v)) for k, v in data["kwargs"]),
            }
        )


@dataclass
class Summary:
    """What a file tells the rest of its project."""

    exports: dict[str, Export] = field(default_factory=dict)  # module-level name -> what
    imports: dict[str, str] = field(default_factory=dict)  # module-level name -> qualname
    stars: tuple[str, ...] = ()  # modules it imports `*` from
    public: tuple[str, ...] | None = None  # `__all__`, when the file spells it out
    calls: list[Call] = field(default_factory=list)
    uses: list[tuple[str, Uses]] = field(default_factory=list)  # sites of other files

    def names(self) -> tuple[str, ...]:
        """What `from <this module> import *` binds (the star imports' names aside)."""
        if self.public is not None:
            return self.public
        return tuple(n for n in (*self.exports, *self.imports) if not n.startswith("_"))

    @cached_property
    def effectful(self) -> tuple[Function, ...]:
        """Its functions and methods that do something with a parameter (`effects`): read
        at every linking of the program, the summary read once."""
        functions: list[Function] = []
        for export in self.exports.values():
            if isinstance(export, Function):
                functions.append(export)
            elif isinstance(export, Class):
                functions.extend(f for _, f in export.methods)
        return tuple(f for f in functions if f.effects)

    def to_json(self) -> dict[str, Any]:
        return {
            "exports": {n: e.to_json() for n, e in self.exports.items()},
            "imports": self.imports,
            "stars": list(self.stars),
            "public": list(self.public) if self.public is not None else None,
            "calls": [c.to_json() for c in self.calls],
            "uses": [[ref, u.to_json()] for ref, u in self.uses],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Summary:
        public = data["public"]
        return cls(
            {n: export_from_json(e) for n, e in data["exports"].items()},
            dict(data["imports"]),
            tuple(data["stars"]),
            tuple(public) if public is not None else None,
            [Call.from_json(c) for c in data["calls"]],
            [(ref, Uses(**u)) for ref, u in data["uses"]],
        )


@dataclass
class Environment:
    """The rest of the program, as one file's analysis sees it. This base knows nothing
    (a file alone); the project layer's subclass answers from the project's summaries.
    Every question asked is recorded in `answers` (its answer as plain data)."""

    path: str | None = None  # the file's key in its project ("pkg/engine.py")
    answers: Answers = field(default_factory=dict)
    # The file trains, evaluates or loads data, or is a script wiring files that do: what
    # it calls and passes tells the others what they are given (`Project.engaged`).
    engaged: bool = False
    _objects: dict[Question, Any] = field(default_factory=dict, repr=False, compare=False)
    _stepped_names: dict[str, str] | None = field(default=None, repr=False, compare=False)

    @property
    def reached(self) -> bool:
        """Other files call this file's functions or use what it builds: analyse it even
        if it holds none of the tokens the rules look for."""
        return False

    @property
    def wanted(self) -> bool:
        """Analyse the file even where no selected rule reads it: the project reaches into
        it, or its summary tells the project what other files are given (`engaged`)."""
        return self.engaged or self.reached

    @property
    def linked(self) -> bool:
        """The project listens to what this file calls and does (its summary's calls and
        uses are linked); a file analysed on its own tells only what it exports."""
        return False

    def ref(self, local: str) -> str:
        """A reference to a function, class or value of this file, as other files name it
        (`local`: its dotted name in the file, "train", "Trainer.fit")."""
        return f"{self.path or '<file>'}::{local}"

    def site(self, local: str) -> str:
        """A reference to a site of this file ("#0": its first DataLoader, "@1": its
        second model)."""
        return f"{self.path or '<file>'}{local}"

    def export(self, qualname: str) -> Export | None:
        """What a name imported from another file of the project is (`qualname` as the
        import writes it: "pkg.models.Net", ".models.Net", "utils.MetricLogger")."""
        if not self.knows(qualname):
            return None
        found: Export | None = self._ask(
            Question("export", qualname), lambda: self._telling(qualname)
        )
        return found

    def _telling(self, qualname: str) -> Export | None:
        """What a name is, where it tells something (a plain function or class of the
        project answers None, as a name from outside it does); a class without its
        methods, which are asked about one by one (`Class.methods` empty)."""
        found = self._export(qualname)
        if found is None or not found.telling:
            return None
        return replace(found, methods=()) if isinstance(found, Class) else found

    def star(self, module: str) -> tuple[str, ...]:
        """The names `from module import *` binds, for a module of the project (`nn=torch.nn`
        for a name that module imports: see `Program.star`)."""
        if not self.knows(module):
            return ()
        names: tuple[str, ...] = self._ask(
            Question("star", module), lambda: tuple(self._star(module))
        )
        return names

    def parameter(self, function: str, name: str) -> Value | None:
        """What the other files pass for parameter `name` of a function of this file
        (`function` its dotted name in the file: "train", "Trainer.fit")."""
        if self.path is None:
            return None
        found: Value | None = self._ask(
            Question("param", function, name), lambda: self._parameter(function, name)
        )
        return found

    def always_passed(self, function: str, name: str) -> bool:
        """Every call the other files make of a function of this file passes parameter
        `name` (told or not: `num_workers=args.workers`): its default is not what they
        get."""
        if self.path is None:
            return False
        found: bool = self._ask(
            Question("given", function, name), lambda: self._always_passed(function, name)
        )
        return found

    def numbers_passed(self, function: str, name: str) -> bool:
        """Every call the other files make of a function of this file passes Python
        numbers for parameter `name` (each keyword a `**kwargs` takes, too): a
        `v.item()` under `isinstance(v, torch.Tensor)` never runs there."""
        if self.path is None:
            return False
        found: bool = self._ask(
            Question("numbers", function, name), lambda: self._numbers_passed(function, name)
        )
        return found

    def received(self, function: str, name: str) -> Value | None:
        """What `parameter` answered, if this file's analysis asked it (asked here, the
        question would make the file depend on its answer)."""
        found: Value | None = self._objects.get(Question("param", function, name))
        return found

    def callers(self, function: str) -> Callers | None:
        if self.path is None:
            return None
        found: Callers | None = self._ask(
            Question("callers", function), lambda: self._callers(function)
        )
        return found

    def uses(self, site: str) -> Uses | None:
        """What the other files do with a site of this file ("#0": its first DataLoader,
        "@1": its second model)."""
        if self.path is None:
            return None
        found: Uses | None = self._ask(Question("uses", site), lambda: self._uses(site))
        return found

    def stepped(self, function: str) -> str | None:
        """A caller (for messages) of another file of the project that runs `function`
        (a dotted name) of this file on every step of training on a GPU, or None. Asked
        function by function: a file is analysed again when a function it asked about
        becomes one, not when any does."""
        if self.path is None:
            return None
        found: str | None = self._ask(
            Question("stepped", function), lambda: self._stepped_map().get(function)
        )
        return found

    def any_stepped(self) -> bool:
        """Other files of the project run some function of this file on every step of
        training on a GPU."""
        if self.path is None:
            return False
        found: bool = self._ask(Question("any stepped"), lambda: bool(self._stepped_map()))
        return found

    def _stepped_map(self) -> dict[str, str]:
        if self._stepped_names is None:
            self._stepped_names = dict(self._stepped())
        return self._stepped_names

    def replay(self, question: Question) -> Any:
        """The answer to a recorded question, asked again here (the question itself where
        it is not asked: a name that no longer names a module of the project)."""
        kind, subject, name = question.kind, question.subject, question.name
        if kind == "export":
            self.export(subject)
        elif kind == "star":
            self.star(subject)
        elif kind == "param":
            self.parameter(subject, name)
        elif kind == "given":
            self.always_passed(subject, name)
        elif kind == "numbers":
            self.numbers_passed(subject, name)
        elif kind == "callers":
            self.callers(subject)
        elif kind == "uses":
            self.uses(subject)
        elif kind == "stepped":
            self.stepped(subject)
        elif kind == "any stepped":
            self.any_stepped()
        return self.answers.get(question, question)  # never equal to an answer

    def holds(self, answers: Answers) -> bool:
        """Every recorded answer is still the answer here."""
        return all(self.replay(q) == v for q, v in answers.items())

    def _ask(self, question: Question, compute: Callable[[], Any]) -> Any:
        """The answer to a question, computed once; recorded as plain data."""
        if question not in self._objects:
            found = compute()
            self._objects[question] = found
            if found is None or isinstance(found, tuple):
                self.answers[question] = _listed(found)
            elif isinstance(found, (bool, str)):
                self.answers[question] = found
            else:
                self.answers[question] = found.to_json()
        return self._objects[question]

    # -- what a project answers (nothing, here) ----------------------------------------

    def knows(self, qualname: str) -> bool:
        """`qualname` may name a module of the project (else it is not asked about)."""
        return False

    def _export(self, qualname: str) -> Export | None:
        return None

    def _star(self, module: str) -> Iterable[str]:
        return ()

    def _parameter(self, function: str, name: str) -> Value | None:
        return None

    def _callers(self, function: str) -> Callers | None:
        return None

    def _always_passed(self, function: str, name: str) -> bool:
        return False

    def _numbers_passed(self, function: str, name: str) -> bool:
        return False

    def _uses(self, site: str) -> Uses | None:
        return None

    def _stepped(self) -> tuple[tuple[str, str], ...]:
        return ()


def _listed(found: tuple[Any, ...] | None) -> list[Any] | None:
    """A tuple answer as plain data (lists all the way down)."""
    if found is None:
        return None
    return [_listed(x) if isinstance(x, tuple) else x for x in found]
