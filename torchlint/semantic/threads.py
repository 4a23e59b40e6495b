"""The threads the file starts (the functions they run, where they are started) and the
calls that make the calling thread wait (sleep, block on an event, a queue, a socket, a
process), through the file's own functions."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import libcst as cst

from torchlint.semantic.builder import Facts
from torchlint.semantic.functions import Functions
from torchlint.semantic.scopes import CallSite, Kind, Scope, ScopeKind
from torchlint.semantic.syntax import MISSING, bool_value, int_value, is_none, keyword, positional

THREAD = "threading.Thread"
# A function handed to one of these runs in a new thread of this process (a `Process`
# runs in another process, with a GIL of its own: not a thread).
START_NEW_THREAD = ("_thread.start_new_thread", "_thread.start_new")
THREAD_POOLS = (
    "concurrent.futures.ThreadPoolExecutor",
    "concurrent.futures.thread.ThreadPoolExecutor",
)
PARTIAL = "functools.partial"
MAX_DEPTH = 4  # classes of the file followed to `threading.Thread`

# Calls that always make the calling thread wait (the GIL released meanwhile).
WAITING = frozenset(
    {
        "time.sleep", "asyncio.sleep", "gevent.sleep", "eventlet.sleep", "select.select",
        "subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
        "subprocess.getoutput", "subprocess.getstatusoutput", "os.system", "os.wait",
        "os.waitpid", "signal.pause", "signal.sigwait", "input", "next",
        "urllib.request.urlopen", "concurrent.futures.wait", "multiprocessing.connection.wait",
        "torch.distributed.barrier", "torch.distributed.recv", "torch.cuda.synchronize",
        "cv2.waitKey", "matplotlib.pyplot.pause",
    }
)  # fmt: skip
WAITING_PREFIXES = ("requests.", "httpx.", "socket.create_connection")
# Methods that wait whatever they are called on: an Event's, a Condition's or a
# process's `wait`, a socket's or a pipe's reads, a future's result, a selector, a CUDA
# stream's or event's `synchronize`.
WAITING_METHODS = frozenset(
    {
        "sleep", "wait", "wait_for", "communicate", "result", "accept", "recv", "recvfrom",
        "recv_into", "recvfrom_into", "recv_bytes", "recv_multipart", "recv_string",
        "recv_json", "recv_pyobj", "read", "readline", "readlines", "select", "urlopen",
        "synchronize",
    }
)  # fmt: skip
# Methods that wait unless told not to: a queue's `get`/`put` (`block=False`), a lock's or
# a semaphore's `acquire` (`blocking=False`).
BLOCK_FLAG = {"get": "block", "put": "block", "acquire": "blocking"}
# `psutil.cpu_percent(interval=1)` sleeps for the interval to measure over it.
MEASURING = ("psutil.cpu_percent", "psutil.cpu_times_percent")


@dataclass(frozen=True, eq=False)
class Started:
    """A function of this file run in a thread: `threading.Thread(target=f)`, a
    `threading.Thread` subclass's `run` (its instance built here), `executor.submit(f)` on
    a `ThreadPoolExecutor`, `_thread.start_new_thread(f, args)`; `start` is the call
    that creates the thread (or builds the subclass's instance)."""

    function: cst.FunctionDef
    start: CallSite


class Threads:
    def __init__(self, facts: Facts, functions: Functions) -> None:
        self.facts = facts
        self.functions = functions
        self._waits: dict[int, bool] = {}

    @cached_property
    def started(self) -> list[Started]:
        """The functions of this file that run in a thread the file starts, once each
        (with the first call that starts it), in source order of those calls."""
        found: dict[int, Started] = {}
        for call in self.facts.calls:
            for function in self._run_by(call):
                found.setdefault(id(function), Started(function, call))
        return list(found.values())

    def _run_by(self, call: CallSite) -> list[cst.FunctionDef]:
        if call.qualname == THREAD:
            return self._function(call.arg("target", index=1), call.scope)
        if call.qualname in START_NEW_THREAD:
            return self._function(call.arg("function", index=0), call.scope)
        if call.method == "submit" and call.receiver is not None and call.node.args:
            if self._thread_pool(call.receiver, call.scope):
                return self._function(call.node.args[0].value, call.scope)
            return []
        if not self._thread_classes:
            return []
        binding = self.functions.definition(call.node.func, call.scope)
        if binding is None or id(binding.node) not in self._thread_classes:
            return []
        run = self._thread_classes[id(binding.node)].member("run")
        found = run.only(Kind.DEF) if run is not None else None
        return [found.node] if found is not None and isinstance(found.node, cst.FunctionDef) else []

    def _function(self, node: cst.BaseExpression, scope: Scope) -> list[cst.FunctionDef]:
        """The `def` of this file an argument names: `f`, `self.method`, `obj.method`,
        `functools.partial(f, ...)`, `lambda: f(...)`."""
        if isinstance(node, cst.Lambda) and isinstance(node.body, cst.Call):
            return self._function(node.body.func, self.facts.scopes[id(node)])
        if isinstance(node, cst.Call) and node.args and scope.resolve(node.func) == PARTIAL:
            return self._function(node.args[0].value, scope)
        if node is MISSING or not isinstance(node, (cst.Name, cst.Attribute)):
            return []
        binding = self.functions.definition(node, scope)
        if binding is None or not isinstance(binding.node, cst.FunctionDef):
            return []
        return [binding.node]

    @cached_property
    def _thread_classes(self) -> dict[int, Scope]:
        """id(class) -> its scope, for the classes of this file deriving from
        `threading.Thread`."""
        return {
            id(scope.node): scope
            for scope in self.facts.scopes.values()
            if scope.kind is ScopeKind.CLASS and self._thread_class(scope)
        }

    def _thread_class(self, cls: Scope, _depth: int = 0) -> bool:
        """A class of this file deriving from `threading.Thread` (through classes of the
        file)."""
        node = cls.node
        if _depth > MAX_DEPTH or not isinstance(node, cst.ClassDef) or cls.parent is None:
            return False
        if any(cls.parent.resolve(b.value) == THREAD for b in node.bases):
            return True
        return any(self._thread_class(base, _depth + 1) for base in cls.bases)

    def _thread_pool(self, node: cst.BaseExpression, scope: Scope) -> bool:
        """`node` holds a `ThreadPoolExecutor`: every binding of the name builds one
        (`pool = ThreadPoolExecutor(...)`, `with ThreadPoolExecutor() as pool:`)."""
        symbol = scope.lookup_expr(node)
        if symbol is None or not symbol.bindings:
            return False
        for b in symbol.bindings:
            built = b.value if b.kind is Kind.ASSIGN else b.source if b.kind is Kind.WITH else None
            if (
                not isinstance(built, cst.Call)
                or b.ctx.scope.resolve(built.func) not in THREAD_POOLS
            ):
                return False
        return True

    # -- waiting -------------------------------------------------------------------------

    @cached_property
    def _calls_in(self) -> dict[int, list[CallSite]]:
        """id(def) -> the calls in its body (not in functions nested in it)."""
        found: dict[int, list[CallSite]] = {}
        for call in self.facts.calls:
            if call.ctx.function is not None:
                found.setdefault(id(call.ctx.function), []).append(call)
        return found

    def calls_in(self, function: cst.FunctionDef) -> list[CallSite]:
        return self._calls_in.get(id(function), [])

    def runs(self, function: cst.FunctionDef) -> list[cst.FunctionDef]:
        """The function and the functions of this file it calls, through their calls."""
        found = {id(function): function}
        todo = [function]
        while todo:
            for call in self.calls_in(todo.pop()):
                target = self.functions.target(call)
                if target is not None and id(target.function) not in found:
                    found[id(target.function)] = target.function
                    todo.append(target.function)
        return list(found.values())

    def waits(self, call: CallSite) -> bool:
        """The call may make the calling thread wait: it sleeps, waits on an event, a
        condition, a thread or a process, takes from or puts to a queue blocking, reads a
        socket, a pipe or a file, runs a subprocess or a network request, waits for the GPU;
        or it runs a function of this file that does (through the functions it calls), or
        a function of another file of the project (its body is not seen here: presumed
        to)."""
        if _waiting(call):
            return True
        target = self.functions.target(call)
        if target is not None:
            return self.function_waits(target.function)
        if self.functions.external(call) is not None or self.functions.method_called(call):
            return True
        return call.qualname is not None and self.functions.env.knows(call.qualname)

    def function_waits(self, function: cst.FunctionDef) -> bool:
        """Some call in the function's body may wait (`waits`)."""
        key = id(function)
        if key not in self._waits:
            self._waits[key] = False  # while computing (a function calling itself)
            self._waits[key] = any(self.waits(c) for c in self.calls_in(function))
        return self._waits[key]


def _waiting(call: CallSite) -> bool:
    """The call itself waits, by what it is (names through the imports) or, on a receiver
    we cannot name, by its method and arguments."""
    qualname = call.qualname
    if qualname is not None:
        if qualname in WAITING or qualname.startswith(WAITING_PREFIXES):
            return True
        if qualname in MEASURING:
            interval = call.arg("interval", index=0)
            return not (interval is MISSING or is_none(interval) or int_value(interval) == 0)
    method = call.method
    if method is None:
        return False
    if method in WAITING_METHODS:
        return True
    if method == "join":  # a thread's or a process's `join([timeout])`, not `sep.join(items)`
        args = positional(call.node)
        timed = len(args) == 1 and isinstance(args[0], (cst.Integer, cst.Float))
        return not args or timed or keyword(call.node, "timeout") is not MISSING
    if method == "poll":  # `select.poll().poll(timeout)`, `conn.poll(timeout)`; not `proc.poll()`
        return bool(call.node.args)
    flag = BLOCK_FLAG.get(method)
    if flag is None:
        return False
    args = positional(call.node)
    if method == "get" and args and bool_value(args[0]) is None:
        return False  # a mapping's `get(key)`, not a queue's `get(block, timeout)`
    block = keyword(call.node, flag)
    if block is MISSING:
        index = 1 if method == "put" else 0
        block = args[index] if len(args) > index else MISSING
    return block is MISSING or bool_value(block) is not False
