"""An explanation as text: the whole of it as `torchlint explain` prints it (`render`),
and the few lines of Markdown the language server's hover shows at a line (`markdown`),
in the same words."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchlint.explain.facts import at_text

if TYPE_CHECKING:
    from torchlint.explain import Explanation, Finding, RuleState
    from torchlint.explain.facts import At, Facts, LoaderFacts, LoopFacts, ModelFacts, NameFacts
    from torchlint.semantic.external import Callers


def render(e: Explanation) -> list[str]:
    """The explanation as text, a section at a time."""
    if e.line is None:
        title = f"{e.path} (the whole file)"
    else:
        title = f"{e.path}:{'' if e.cell is None else f'cell {e.cell}:'}{e.line}: {e.text}"
    out = [title, "", "Findings" + (" on this line:" if e.line is not None else ":")]
    out += [line for f in e.findings for line in _finding(f)] or ["  none"]
    f = e.facts
    if e.line is not None:
        out += ["", "Where it runs:", *_where(f)]
        out += ["", "Names on this line:"]
        out += [f"  `{n.expression}`: {_name(n)}" for n in f.names] or ["  nothing known"]
    out += ["", "The file:", f"  places work on a GPU: {'yes' if f.gpu.uses_gpu else 'no'}"]
    out += [f"    {f.gpu.why}", f"  read by the selected rules: {e.read}"]
    if e.line is None:
        out += _whole(f)
    out += ["", f"Rules ({len(e.rules)} selected):", *_rules(e.rules, e.line is None)]
    out += [f"  {said}" for said in e.errors]
    if not (f.gpu.uses_gpu or f.gpu.presumed_accelerator):
        out.append(
            "  (no GPU: the rules that report only where work goes to a GPU stay silent "
            "here; `torchlint rule CODE` says which, under 'Unknown device')"
        )
    return out


def _at(at: At | None) -> str:
    return "another file" if at is None else at_text(at)


def _finding(f: Finding) -> list[str]:
    state = "shown" if not f.hidden else "hidden: " + "; ".join(f.hidden)
    cell = f"cell {f.cell}:" if f.cell is not None else ""
    return [f"  {cell}{f.line}:{f.column} {f.code} {f.name} ({f.impact} impact), {state}",
            f"      {f.message}"]  # fmt: skip


def _where(f: Facts) -> list[str]:
    out = [f"{'  ' * (depth + 1)}{said}" for depth, said in _around(f)]
    if f.per_step:
        out.append(f"  runs on {_every(f)}")
    elif f.per_step is not None:
        out.append(f"  does not run on every training step ({NOT_PER_STEP})")
    return out


NOT_PER_STEP = (
    "not in a training step loop, a `forward`, a `training_step`, nor a function run from one"
)


def _around(f: Facts) -> list[tuple[int, str]]:
    """What the line runs in, outermost first: its class, its function (and how other
    files call it), its loops, autograd off; each with its depth (1: of the line above)."""
    out = [] if f.function or f.class_ or f.loops else [(0, "at module level")]
    if f.class_ is not None:
        out.append((0, f"in class `{f.class_}`"))
    if f.function is not None:
        fn = f.function
        called = ", ".join(_at(a) for a in fn.called_at)
        said = f"in `{fn.name}` ({_at(fn.at)})" + (f", called here at {called}" if called else "")
        out.append((0, said))
        if fn.elsewhere is not None:
            out.append((1, _callers(fn.elsewhere)))
        if fn.stepped_by is not None:
            out.append((1, f"run on every training step on a GPU by {fn.stepped_by}"))
    for loop in f.loops:
        out.append((0, ("this line is " if loop.on_line else "in ") + _loop(loop)))
    if f.grad_disabled:
        out.append((0, "with autograd off (`torch.no_grad()`, `inference_mode`)"))
    return out


def _every(f: Facts) -> str:
    """How often a line that runs per step runs: every step, or every N."""
    if f.period is None:
        return "every training step"
    return f"every {f.period} steps" if f.period else "every N steps (an N it cannot read)"


def _callers(c: Callers) -> str:
    said = [
        text
        for text, on in (
            ("every training step", c.per_step),
            ("again and again, in a loop", c.repeated and not c.per_step),
            ("on a GPU", c.gpu),
            ("with autograd off", c.no_grad),
            ("only under `if __name__ == '__main__':`", c.guarded),
        )
        if on
    ]
    return f"called by another file: {c.where or 'a file of its project'}" + (
        f" ({', '.join(said)})" if said else ""
    )


def _loop(loop: LoopFacts) -> str:
    where = f" in `{loop.function}`" if loop.function else ""
    over = "; ".join(_loader(x) for x in loop.loaders)
    article = "an" if loop.kind[0] in "aeiou" else "a"
    text = f"{article} {loop.kind} ({_at(loop.at)}{where}): `{loop.header}`"
    text += f", over {over}" if over else ""
    return text + (", every training step" if loop.per_step and not loop.on_line else "")


def _loader(x: LoaderFacts) -> str:
    if x.at is None:
        return f"a DataLoader built in {x.built}" + (" (pinned)" if x.pinned else "")
    args = ", ".join(f"{k}={v}" if v is not None else f"{k} unset" for k, v in x.arguments.items())
    trains = ", a training loop iterates it" if x.trains else ""
    return f"the DataLoader of {_at(x.at)} ({args}{trains})"


def _model(m: ModelFacts) -> str:
    size = _size(m.parameters) if m.kind == "network" else m.kind
    builds = f"{m.builds}, " if m.builds else ""
    gpu = ", on a GPU" if m.on_gpu else ""
    return f"`{m.name}` ({builds}{m.origin} at {_at(m.at)}, {size}{gpu})"


def _size(parameters: int | None) -> str:
    if parameters is None:
        return "size unknown"
    for unit, scale in (("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if parameters >= scale:
            return f"~{parameters / scale:.3g}{unit} parameters"
    return f"{parameters} parameters"


def _name(n: NameFacts) -> str:
    said = []
    if n.device is not None:
        said.append(f"names {n.device}")
    if n.moves_to is not None:
        said.append(f"moves to {n.moves_to}")
    if n.model is not None:
        said.append(f"holds the model {_model(n.model)}")
    if n.runs is not None:
        said.append(f"runs the model {_model(n.runs)}")
    said += [f"is {_loader(x)}" for x in n.loaders]
    if n.calls is not None:
        said.append(f"calls {n.calls}")
    return "; ".join(said)


def _whole(f: Facts) -> list[str]:
    out = ["", "Loops:", *(f"  {_loop(loop)}" for loop in f.loops)] if f.loops else []
    if f.functions:
        out += ["", "Functions other files run:"]
        for fn in f.functions:
            out.append(f"  `{fn.name}` ({_at(fn.at)})")
            if fn.elsewhere is not None:
                out.append(f"    {_callers(fn.elsewhere)}")
            if fn.stepped_by is not None:
                out.append(f"    run on every training step on a GPU by {fn.stepped_by}")
    if f.models:
        out += ["", "Models:", *(f"  {_model(m)}" for m in f.models)]
    if f.loaders:
        out += ["", "DataLoaders:", *(f"  {_loader(x)}" for x in f.loaders)]
    return out


def _rules(rules: list[RuleState], whole: bool) -> list[str]:
    """The selected rules, grouped by what they did (here: at the line, or in the file),
    and, at a line, where else in the file they report."""
    here = "" if whole else " here"
    titles = {
        "reported": f"reported{here}",
        "hidden": f"found{here} but hidden (see Findings)",
        "no finding": "read the file, no finding" + ("" if whole else " on this line"),
        "did not read the file": "did not read the file",
        "ignored in this file": "ignored in this file (per-file-ignores)",
    }
    groups: dict[str, list[str]] = {}
    for r in rules:
        groups.setdefault(r.here, []).append(r.code + (_lines(r.found) if whole else ""))
    out = [f"  {titles[k]}: {', '.join(groups[k])}" for k in titles if k in groups]
    silent = [r for r in rules if r.passed]
    if silent:
        out.append(f"  why they stayed silent{here}:")
        out += [f"    {r.code}: {why}" for r in silent for why in r.passed]
    elsewhere = [r.code + _lines(r.found) for r in rules if r.found]
    if not whole and elsewhere:
        out.append(f"  their findings in the file, by line: {', '.join(elsewhere)}")
    return out or ["  none"]


def _lines(found: list[At]) -> str:
    if not found:
        return ""
    said = (f"cell {a.cell}:{a.line}" if a.cell else str(a.line) for a in found)
    return f" ({', '.join(said)})"


# -- the hover ----------------------------------------------------------------------------


def markdown(e: Explanation) -> str:
    """The explanation at a line in a few lines of Markdown (an editor's hover): the
    findings there (a hidden one with why, and its message, which no diagnostic shows),
    how often the line runs and in what, what its names hold, whether the file places
    work on a GPU, and why the rules that looked at the line stayed silent; what has
    nothing to say is left out (no list of the rules)."""
    f = e.facts
    count = len(e.findings)
    title = f"{count} finding{'s' if count > 1 else ''}" if count else "no finding"
    out = [f"**torchlint**: {title} on this line"]
    for x in e.findings:
        state = "shown" if not x.hidden else "hidden: " + "; ".join(x.hidden)
        out.append(f"- **{x.code}** {x.name} ({x.impact} impact), {state}")
        if x.hidden:
            out.append(f"  - {x.message}")
    if f.per_step is not None:
        when = f"Runs on {_every(f)}" if f.per_step else "Not per step"
        out += ["", f"**{when}**" + ("" if f.per_step else f" ({NOT_PER_STEP})")]
        out += [f"{'  ' * depth}- {said}" for depth, said in _around(f)]
    if f.names:
        out += ["", "**Names**", *(f"- `{n.expression}`: {_name(n)}" for n in f.names)]
    out += ["", f"**GPU**: {'yes' if f.gpu.uses_gpu else 'no'}: {f.gpu.why}"]
    if e.rules and not any(r.reads for r in e.rules):
        out += ["", f"**Not read by the rules**: {e.read.removeprefix('no: ')}"]
    silent: dict[str, list[str]] = {}  # why -> the rules that said it
    for r in e.rules:
        for why in r.passed:
            silent.setdefault(why, []).append(r.code)
    if silent:
        out += ["", "**Why the rules stayed silent**"]
        out += [f"- {', '.join(codes)}: {why}" for why, codes in silent.items()]
    if e.errors:
        out += ["", "**Rules that raised**", *(f"- {said}" for said in e.errors)]
    return "\n".join(out)
