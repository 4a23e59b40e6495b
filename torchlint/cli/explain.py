"""`torchlint explain PATH[:LINE]`: what the analysis knows at a line (or in a whole
file), as `check` sees the file with its project; the facts are torchlint/explain/'s,
this module prints them (text, or JSON for tools)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from torchlint.cli.app import EXIT_ERROR, IgnoreOpt, SelectOpt, error
from torchlint.cli.flags import (
    CheckOptions,
    ConfigArgsOpt,
    ExtendOpt,
    IsolatedOpt,
    NoCacheOpt,
    PreviewOpt,
    ShowLowImpactOpt,
    TargetTorchOpt,
)

if TYPE_CHECKING:
    from torchlint.explain import Explanation, Finding, RuleState
    from torchlint.explain.facts import At, Facts, LoaderFacts, LoopFacts, ModelFacts, NameFacts
    from torchlint.semantic.external import Callers

PlaceArg = Annotated[
    str,
    typer.Argument(
        metavar="PATH[:LINE]",
        help="A file and a line (`train.py:42`; a notebook's `run.ipynb:cell 3:7`), or a "
        "file alone for all of it",
        show_default=False,
    ),
]
FormatOpt = Annotated[
    str,
    typer.Option("--output-format", metavar="OUTPUT_FORMAT", help="text (the default) or json"),
]


def explain_command(
    where: PlaceArg,
    output_format: FormatOpt = "text",
    config: ConfigArgsOpt = None,
    isolated: IsolatedOpt = False,
    select: SelectOpt = None,
    extend_select: ExtendOpt = None,
    ignore: IgnoreOpt = None,
    preview: PreviewOpt = None,
    show_low_impact: ShowLowImpactOpt = False,
    target_torch: TargetTorchOpt = None,
    no_cache: NoCacheOpt = False,
) -> None:
    """Why a line is flagged, or not: what torchlint knows there.

    The findings at the line (and why any is hidden), the loops and the function around
    it, what its names hold, where the file puts its work, and which selected rules read
    the file; the file checked as `check` checks it, with its project. A file alone:
    all of it."""
    from torchlint.cli.check import plan
    from torchlint.config.load import ConfigError
    from torchlint.explain import ExplainError, explain, place
    from torchlint.run.cache import location

    if output_format not in ("text", "json"):
        error(f"unknown output format {output_format!r} (choose text or json)")
        raise typer.Exit(EXIT_ERROR)
    try:
        at = place(where)
        options = CheckOptions(
            paths=[str(at.path)],
            config=config,
            isolated=isolated,
            select=select,
            extend_select=extend_select,
            ignore=ignore,
            preview=preview,
            show_low_impact=show_low_impact,
            target_torch=target_torch,
        )
        run_plan = plan(options)
        cache_dir = None if no_cache else location(run_plan.config.root)
        found = explain(at, run_plan, cache_dir)
    except (ExplainError, ConfigError) as exc:
        error(str(exc))
        raise typer.Exit(EXIT_ERROR) from None
    if output_format == "json":
        typer.echo(json.dumps(found.to_json(), indent=2))
    else:
        typer.echo("\n".join(render(found)))


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
    from torchlint.explain.facts import at_text

    return "another file" if at is None else at_text(at)


def _finding(f: Finding) -> list[str]:
    state = "shown" if not f.hidden else "hidden: " + "; ".join(f.hidden)
    cell = f"cell {f.cell}:" if f.cell is not None else ""
    return [f"  {cell}{f.line}:{f.column} {f.code} {f.name} ({f.impact} impact), {state}",
            f"      {f.message}"]  # fmt: skip


def _where(f: Facts) -> list[str]:
    out = [] if f.function or f.class_ or f.loops else ["  at module level"]
    if f.class_ is not None:
        out.append(f"  in class `{f.class_}`")
    if f.function is not None:
        fn = f.function
        called = ", ".join(_at(a) for a in fn.called_at)
        line = f"  in `{fn.name}` ({_at(fn.at)})" + (f", called here at {called}" if called else "")
        out.append(line)
        if fn.elsewhere is not None:
            out.append(f"    {_callers(fn.elsewhere)}")
        if fn.stepped_by is not None:
            out.append(f"    run on every training step on a GPU by {fn.stepped_by}")
    for loop in f.loops:
        out.append("  " + ("this line is " if loop.on_line else "in ") + _loop(loop))
    if f.grad_disabled:
        out.append("  with autograd off (`torch.no_grad()`, `inference_mode`)")
    if f.per_step:
        when = "every training step"
        if f.period is not None:
            when = f"every {f.period} steps" if f.period else "every N steps (an N it cannot read)"
        out.append(f"  runs on {when}")
    elif f.per_step is not None:
        out.append(
            "  does not run on every training step (not in a training step loop, a "
            "`forward`, a `training_step`, nor a function run from one)"
        )
    return out


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
