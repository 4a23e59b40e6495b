"""Which of the values bound to a name reach a loop, in straight-line code (a script's
top level, a notebook's cells in order, a function's body): a value built after the loop,
or replaced by another before it, does not, unless a loop around both runs them again.
Read by calls' ranks in source order (`CallSite.order`)."""

from __future__ import annotations

from torchlint.semantic.scopes import CallSite, Kind, Loop, Symbol


def straight(call: CallSite, loop: Loop) -> bool:
    """`call` runs in the same straight-line code as the loop: the same function, and no
    loop around it that does not also hold the loop (which would run both again)."""
    outer = (*loop.ctx.loops, loop)
    return call.ctx.function is loop.ctx.function and all(i in outer for i in call.ctx.loops)


def built_after(call: CallSite, loop: Loop) -> bool:
    """`call` runs after the loop, in the same function, and no loop around the loop
    holds it: what it builds never reaches the loop (a notebook's later cell rebinding
    `train_loader` for a plot)."""
    if call.ctx.function is not loop.ctx.function or not loop.calls:
        return False
    if any(outer in call.ctx.loops for outer in (*loop.ctx.loops, loop)):
        return False
    return call.order > max(c.order for c in loop.calls)


def replaced(call: CallSite, others: list[CallSite], loop: Loop, name: Symbol | None) -> bool:
    """Another of the calls assigned to the name the loop walks runs after `call` and
    before the loop, in the same straight-line code and under no condition the loop is
    not under: it replaced what `call` built (a notebook's first `train_loader`, for a
    statistics pass, bound again for training)."""
    if name is None or not loop.calls:
        return False
    assigned = {id(b.value) for b in name.bindings if b.kind is Kind.ASSIGN}
    if id(call.node) not in assigned or not straight(call, loop):
        return False
    start = min(c.order for c in loop.calls)
    return any(
        id(other.node) in assigned
        and call.order < other.order < start
        and straight(other, loop)
        and all(test in loop.ctx.ifs for test in other.ctx.ifs)
        for other in others
    )
