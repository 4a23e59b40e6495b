"""What follows a human-readable report, in ruff's words: how many problems were found and
fixed, what `--fix` and `--unsafe-fixes` would do, and (`--fix --show-fixes`) the fixes
applied per file."""

from __future__ import annotations

from collections import Counter

from torchlint.reporters import Context, fixable
from torchlint.reporters.style import Style
from torchlint.results import SKIPPED, FileResult


def plural(n: int, word: str, suffix: str = "s") -> str:
    return f"{n} {word}{'' if n == 1 else suffix}"


def summary(
    results: list[FileResult], context: Context, diff: bool = False, fix_only: bool = False
) -> str:
    """The summary lines (each ending in a newline), or "" when there is nothing to say;
    only the fixes with `diff` (would fix) or `fix_only` (fixed)."""
    s = Style(context.color)
    remaining = [v for r in results for v in r.records() if v.code != SKIPPED]
    skipped = sum(1 for r in results if r.warning is not None)
    fixed = sum(len(r.fixed) for r in results)
    later = sum(len(r.later) for r in results)
    # Fixes of findings a check did not show: other fixes brought them about.
    after = [f"{later} found only after other fixes"] if later else []
    applicable = sum(1 for v in remaining if fixable(v, context))
    hidden = sum(1 for v in remaining if v.fix is not None and not fixable(v, context))
    if diff or fix_only:
        fixes = "fix" if hidden == 1 else "fixes"
        if not fixed:
            none = "No problems would be fixed" if diff else "No problems fixed"
            return f"{none} ({hidden} {fixes} available with `--unsafe-fixes`).\n" if hidden else ""
        more = [f"{hidden} additional {fixes} available with `--unsafe-fixes`"] if hidden else []
        notes = "; ".join(more + after)
        verb = "Would fix" if diff else "Fixed"
        return f"{verb} {plural(fixed, 'problem')}{f' ({notes})' if notes else ''}.\n"
    if fixed:
        total = plural(fixed + len(remaining), "problem")
        notes = "; ".join([f"{fixed} fixed, {len(remaining)} remaining", *after])
        lines = [f"Found {total} ({notes})."]
    elif remaining:
        lines = [f"Found {plural(len(remaining), 'problem')}."]
    elif skipped:
        lines = ["No problems found in the files analysed."]
    else:
        lines = ["All checks passed!"]
    star = f"[{s.cyan('*')}]"
    unsafe = f"{plural(hidden, 'unsafe fix', 'es')} available with `--fix --unsafe-fixes`"
    if context.unsafe_hint and applicable and hidden:
        lines.append(f"{star} {applicable} fixable with `--fix` ({unsafe}).")
    elif applicable:
        lines.append(f"{star} {applicable} fixable with `--fix`.")
    elif context.unsafe_hint and hidden:
        lines.append(f"{unsafe}.")
    low = sum(context.hidden.values())
    if low:
        hidden_low = plural(low, "low-impact finding")
        lines.append(f"{hidden_low} hidden (shown with `--show-low-impact`).")
    if skipped:
        lines.append(f"{plural(skipped, 'file')} skipped: not analysed (too large to check).")
    return "".join(line + "\n" for line in lines)


def fixes_applied(results: list[FileResult], context: Context) -> str:
    """`--fix --show-fixes`: per file (by path), each rule fixed and how often, and how
    many of those findings only other fixes brought about."""
    from torchlint.lint.registry import known

    fixed = sorted((r for r in results if r.fixed), key=lambda r: r.path)
    if not fixed:
        return ""
    s = Style(context.color)
    counts = [Counter(r.fixed) for r in fixed]
    width = len(str(max(max(c.values()) for c in counts)))
    total = sum(len(r.fixed) for r in fixed)
    lines = ["", s.green(s.bold(f"Fixed {plural(total, 'problem')}:"))]
    for result, count in zip(fixed, counts, strict=True):
        lines.append(f"{s.cyan('-')} {s.bold(result.path)}{s.cyan(':')}")
        later = Counter(result.later)
        for code, n in sorted(count.items(), key=lambda item: (-item[1], item[0])):
            rule = known(code)
            name = rule.name if rule else "?"
            after = f", {later[code]} found only after other fixes" if later[code] else ""
            lines.append(f"    {n:>{width}} x {s.red(code)} ({name}){after}")
    return "\n".join(lines) + "\n\n"
