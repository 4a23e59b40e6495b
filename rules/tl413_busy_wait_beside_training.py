"""TL413 busy-wait-beside-training: a thread polls in a loop that never sleeps or waits.

What: a `while` loop run by a thread the training file starts, that polls a flag
another thread sets (`while True:`, `while self.running:`, `while not
stop.is_set():`, `while state.step < total:`) and makes no call that waits on any
pass. The thread is started in the file (`threading.Thread(target=f)` however
`threading` is imported, `functools.partial(f, ...)` or `lambda: f(...)` as the
target, a `threading.Thread` subclass's `run` with its instance built in the file,
`executor.submit(f)` on a `ThreadPoolExecutor`, `_thread.start_new_thread(f, args)`);
the loop is in the function the thread runs or in a function of the file it calls.
Typical: a GPU memory or utilization monitor (`torch.cuda.memory_allocated()`,
`pynvml.nvmlDeviceGetMemoryInfo(...)`, `psutil` readings in a loop), a progress
watcher refreshing a `tqdm` bar, a heartbeat. Reported at the `while`: the loop is
what spins and what needs the wait, and a thread may run several loops, only some of
them spinning.

A call waits when it sleeps or blocks the thread: `time.sleep(...)`,
`event.wait(...)` (so `while not stop.wait(interval):` polls politely),
`cond.wait()`, `thread.join()`, a queue's `get()`/`put(...)` (not `get_nowait()` or
`block=False`), `lock.acquire()`, a socket's or a pipe's `recv`/`accept`/`read`/
`readline`, `select`, `future.result()`, `next(iterator)`, a subprocess run to its
end (`subprocess.run`, `proc.communicate()`, `os.system`), a network request,
`psutil.cpu_percent(interval=1)`, `torch.cuda.synchronize()`; a function of the file
that makes such a call (through the functions it calls); a function of another file
of the project (its body is not seen here: presumed to wait). Readings do not wait:
`pynvml`'s queries, `torch.cuda.memory_allocated()`, `psutil` without an interval,
reading a counter, `print`, logging, a progress bar's `refresh()`.

Not reported: a loop that waits on some pass, even on one branch only (`if
q.empty(): time.sleep(0.1)`): the rule cannot tell how often each branch runs, and
the usual poll sleeps exactly when there is nothing to do; `time.sleep(0)` counts as
a wait (the GIL is handed over on each pass); a loop that ends by itself: a `for`, a
`while` whose condition reads a name the loop itself rebinds (a counter, a retry) or
calls something other than a flag's `is_set()`/`is_alive()` or a mapping's `get` (a
deadline, `while time.time() < end:`), a loop that drains a queue and leaves when it
is empty (`get_nowait()` with `break` in the `except queue.Empty:`); a loop that
trains, runs a network or steps something (`env.step(action)`: a worker's work, not
polling); a `multiprocessing.Process` (or `torch.multiprocessing`'s): another
process, with a GIL of its own; a thread whose function does its work once (no
`while`); a busy loop in the main thread itself (another problem: it delays the
training it is part of, not a thread beside it); a file that does not train, or
trains without a GPU in sight (the measure is the GPU's idle time); a thread started
in another file (a helper module the training script calls: the project layer does
not say whether its callers train).

Why: CPython runs one thread's bytecode at a time. A thread that never waits always
wants the GIL back: each time the training thread releases it (every PyTorch
operator releases it around its dispatch, a DataLoader `get`, a copy to the GPU), the
training thread must wait for the poller to give it up again, up to the switch
interval (5 ms by default) for each hand-over. Kernel launches and the batch
pipeline fall behind, and the GPU waits for work (the convoy effect). The poller
also keeps a CPU core at 100% that the DataLoader workers could use (the part of the
cost left on a free-threaded Python, which has no GIL).

Bad:
    import threading

    peak = 0


    def watch_memory(stop):
        global peak
        while not stop.is_set():
            peak = max(peak, torch.cuda.memory_allocated())


    stop = threading.Event()
    threading.Thread(target=watch_memory, args=(stop,), daemon=True).start()
    model = Net().cuda()
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
    stop.set()

Good:
    import threading

    peak = 0


    def watch_memory(stop):
        global peak
        while not stop.wait(0.01):  # a hundred readings a second, the GIL free in between
            peak = max(peak, torch.cuda.memory_allocated())


    stop = threading.Event()
    threading.Thread(target=watch_memory, args=(stop,), daemon=True).start()
    model = Net().cuda()
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
    stop.set()

Fix: none, not even an unsafe one. Any wait changes the loop's timing: a
`time.sleep(interval)` at the end of the body makes a reading every interval (a peak
shorter than that is missed) and delays the loop's exit by up to the interval, and
`while not stop.wait(interval):` needs the flag to be a `threading.Event`. The
interval is the user's call (a peak tracker wants a fine one, a dashboard a coarse
one) and nothing in the code says it; as in ruff, no fix is offered where the value to
write cannot be known.

Impact: Always high: a poller that never waits takes the GIL from the training thread
at every hand-over for the whole run, and burns a core.

Unknown device: reported where the file puts work on a GPU, or presumably does (a
training loop moving batches to a device its function is given); silent in a file
with no sign of a GPU, since the GPU's idle time is what the rule measures.

Sources: Python docs, `threading` ("CPython implementation detail: ... only one
thread can execute Python code at once"), `sys.setswitchinterval`, `threading.Event.wait`;
David Beazley, "Understanding the Python GIL" (PyCon 2010: the convoy effect of a
CPU-bound thread beside an I/O-bound one); PyTorch Performance Tuning Guide (keep the
CPU side ahead of the GPU).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from torchlint.fixes import FixSafety
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import Loop, Started, TorchModule, dotted_name, int_value
from torchlint.text.walk import walk

# The file may train: a backward pass or an optimizer step of its own, Lightning's
# `training_step`/`trainer.fit(...)`/`LightningCLI`, a transformers `trainer.train()`.
TRAINING = re.compile(r"backward|step\(|\.fit\(|\.train\(|LightningCLI")
# Tests that read a flag another thread sets: `stop.is_set()`, `worker.is_alive()`.
FLAG_METHODS = frozenset({"is_set", "isSet", "is_alive", "isAlive"})
# Taking an item without waiting: a loop that leaves when there is none drains.
TAKING = frozenset({"get_nowait", "get", "pop", "popleft"})
LITERALS = (cst.Integer, cst.Float, cst.SimpleString)


class BusyWaitBesideTraining(Rule):
    code = "TL413"
    name = "busy-wait-beside-training"
    fix_safety = FixSafety.NONE
    tokens = ("Thread", "start_new_thread")
    pattern = TRAINING

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        started = module.threads.started
        if not started or not module.trains:
            return
        if not (module.placement.uses_gpu or module.placement.presumed_accelerator):
            return
        whiles: dict[int, list[Loop]] = {}  # id(def) -> its `while` loops, outer first
        for loop in module.loops:
            if isinstance(loop.node, cst.While) and loop.ctx.function is not None:
                whiles.setdefault(id(loop.ctx.function), []).append(loop)
        seen: set[int] = set()  # loops judged (a loop run by two threads is judged once)
        reported: set[int] = set()
        for thread in started:
            for function in module.threads.runs(thread.function):
                for loop in whiles.get(id(function), ()):
                    if id(loop) in seen or any(id(o) in reported for o in loop.ctx.loops):
                        continue
                    seen.add(id(loop))
                    if _spins(module, loop):
                        reported.add(id(loop))
                        yield self.diagnostic(loop.node, _message(module, thread))


def _message(module: TorchModule, thread: Started) -> str:
    entry = module.functions.local_name(thread.function) or thread.function.name.value
    where = thread.start.ctx.function
    if where is None:
        place = "at module level"
    else:
        place = f"in `{module.functions.local_name(where) or where.name.value}`"
    return (
        f"this loop runs in a thread (`{entry}`, started {place}) and never sleeps or "
        "waits: it spins on the GIL beside training, so the training thread's kernel "
        "launches and data handling wait for it and the GPU idles; wait on each pass "
        "(`while not stop.wait(interval):` with a `threading.Event`, or "
        "`time.sleep(interval)`)"
    )


def _spins(module: TorchModule, loop: Loop) -> bool:
    """The loop polls a flag and nothing in it waits, trains, runs a network, steps or
    drains."""
    assert isinstance(loop.node, cst.While)
    rebound = set(loop.bound) | {
        name
        for b in loop.assignments
        if isinstance(b.node, cst.AugAssign) and (name := dotted_name(b.node.target))
    }
    if loop.is_training or not _flag(loop.node.test, rebound):
        return False
    if any(module.threads.waits(c) for c in loop.calls) or _works(module, loop):
        return False
    return not _drains(loop)


def _works(module: TorchModule, loop: Loop) -> bool:
    """The loop does a worker's work, not polling: it runs a network or steps something
    (an environment's `env.step(action)`, an optimizer), itself or through the file's
    functions it calls."""
    calls = list(loop.calls)
    for call in loop.calls:
        target = module.functions.target(call)
        if target is not None:
            for function in module.threads.runs(target.function):
                calls += module.threads.calls_in(function)
    return any(c.method == "step" or module.models.called(c) is not None for c in calls)


def _flag(node: cst.BaseExpression, bound: set[str]) -> bool:
    """A test that reads state another thread changes: constants, names and attributes
    the loop does not rebind (a key of them), `not`, `and`/`or`, comparisons,
    `event.is_set()`, `thread.is_alive()`."""
    if isinstance(node, cst.Name):
        return node.value not in ("False", "None") and node.value not in bound
    if isinstance(node, cst.Integer):
        return int_value(node) != 0
    if isinstance(node, cst.Attribute):
        name = dotted_name(node)
        if name is None:
            return False
        parts = name.split(".")
        return not any(".".join(parts[: i + 1]) in bound for i in range(len(parts)))
    if isinstance(node, cst.Subscript):
        return _flag(node.value, bound)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return _flag(node.expression, bound)
    if isinstance(node, cst.BooleanOperation):
        return _flag(node.left, bound) and _flag(node.right, bound)
    if isinstance(node, cst.Comparison):
        operands = [node.left, *(c.comparator for c in node.comparisons)]
        return all(isinstance(o, LITERALS) or _flag(o, bound) for o in operands)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        method, args = node.func.attr.value, node.args
        if method == "get" and args and isinstance(args[0].value, cst.SimpleString):
            return _flag(node.func.value, bound)  # a key of a mapping: `state.get("run")`
        return method in FLAG_METHODS and not args
    return False


def _drains(loop: Loop) -> bool:
    """The loop takes items without waiting and leaves when there is none: a `break` or
    a `return` in an `except` handler of its body (`except queue.Empty: break`)."""
    if not any(c.method in TAKING for c in loop.calls):
        return False
    finder = _LeavesOnError()
    walk(loop.node.body, finder)
    return finder.found


class _LeavesOnError(cst.CSTVisitor):
    """Finds a `break` of the loop visited, or a `return`, in an `except` handler."""

    def __init__(self) -> None:
        super().__init__()
        self.handlers = 0
        self.loops = 0
        self.found = False

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        self.handlers += 1

    def leave_ExceptHandler(self, original_node: cst.ExceptHandler) -> None:
        self.handlers -= 1

    def visit_For(self, node: cst.For) -> None:
        self.loops += 1

    def leave_For(self, original_node: cst.For) -> None:
        self.loops -= 1

    def visit_While(self, node: cst.While) -> None:
        self.loops += 1

    def leave_While(self, original_node: cst.While) -> None:
        self.loops -= 1

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_Break(self, node: cst.Break) -> None:
        self.found = self.found or (self.handlers > 0 and self.loops == 0)

    def visit_Return(self, node: cst.Return) -> None:
        self.found = self.found or self.handlers > 0
