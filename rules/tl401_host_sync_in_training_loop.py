"""TL401 host-sync-in-training-loop: the training loop waits for the GPU every step.

What: inside a training loop, on every step (the loop runs a backward pass and an
optimizer step: `opt.step()` of a `torch.optim` optimizer or of another library's (a
class of an `optim` package, one named `*Optimizer`), `scaler.step(opt)`, a warm-up
wrapper's method that steps one; a scheduler's `.step()` is not one): `.item()`,
`.tolist()`, `.cpu()`, `.numpy(force=True)`, `float(...)` / `int(...)` / `print(...)` of
the loss, a model output or a value the loop computes from them (`acc = (out.argmax(1)
== y).float().mean()`, `torch.stack(...)` of losses), any string formatted from one
(f-strings, `%`, `str.format`: formatting converts the tensor), the same given to a
method that formats it (a logger's `log.info("%s", loss)`, tqdm's `set_postfix` and
`set_description`, TensorBoard's `add_scalar`), `loss.data[0]` of the loss or a full
reduction (PyTorch < 0.4's `.item()`; `out.data[0]` is a row, not a read), or
`torch.cuda.synchronize()`; also such calls in the functions of the file the loop calls
every step, down to four calls (the message names the chain; low impact under a
full-batch loop) (`accuracy(logits, y)` that ends in `.item()`, a step function's
`return loss.data[0] / len(x)`, the `__call__` of a loss object the loop calls:
`compute_loss(pred, y)`; a helper's `float(x)` of a parameter every call of the file
passes a loss or a model output: d2l's `accuracy(y_hat, y)`; a method's `int(...)` of a
buffer its class registers, MoCo's `int(self.queue_ptr)`) and in the `forward` of a
network the loop trains (not a value such a function returns that every caller tests in
an `if`/`while` of its loop, an LR finder's divergence break, or hands to an
environment's `step`, an RL agent's action: the host needs it; nor a container filling
up, `if len(pool) < size: pool.append(x.cpu())`, which opens on the first steps only).
In PyTorch Lightning, the `training_step` of a LightningModule (Lightning runs it once
per optimizer step, around its own backward and step) and the functions of the file it
calls, every step: `self.log("loss", loss.item())` is the common case; in PyTorch-
Ignite, the process function of an `Engine` that trains (`return loss.item()`, read by
its handlers). Not reported: calls under a periodic condition (`if step % 100 == 0:`,
`if not i % log_every:`; `if rank == 0:` compares a name no loop changes: every step of
the main process), anything outside the per-step loop (once per epoch is fine),
`y.cpu()` of a batch tensor the loop leaves on the CPU (it moves `x`, not `y`), a read
of a tensor built on the CPU on purpose (`torch.zeros((), device="cpu")`,
`torch.from_numpy(...)`, what a method or `+=` keeps there), a helper's read of a
parameter every call of the file feeds a Python number (a logger's `if isinstance(v,
Tensor): v = v.item()` given the learning rate), a call in a branch for another backend
(`if device.type == "mps":`, `mps = "mps" in device.type; if mps:`, a CPU-only branch:
not the CUDA path), a call in a branch that ends the run or leaves the loop (`raise`,
`sys.exit(...)`, `break`: `if torch.isnan(loss): print(loss.item()); sys.exit(1)` runs
at most once), and a call under a flag that is off by default (an argparse option,
config entry or constant set to False/None): any for `torch.cuda.synchronize()` (`if
args.synchronize_step:`: opt-in timing), one whose name says timing, profiling or
debugging for a value read (`if args.profile:`; not `if args.with_tracking:`, a mode
users run with), or a class's flag from a parameter default no call of the file
overrides (`self.autobalance` of `__init__(..., autobalance=False)`). One finding per
statement (a progress `print` of several values is one sync). Only files that use a GPU
are checked (on the CPU there is nothing to wait for); a device from `torch.accelerator`
counts. A loop that runs on the CPU in such a file (its networks built here and moved to
the CPU, nowhere else, its batches never copied: the CPU half of a notebook that moves
to the GPU later) is left alone. Also, in evaluation loops (a network run over a
loader's batches with no backward pass, outside any training step, under
`torch.no_grad()`, after `.eval()` or in a function named for evaluation: `evaluate`,
`validate`, `test_*`, `predict`, `infer*`, or for a measure: `compute_accuracy`), a sync
on every batch: the CPU waits for each batch before it prepares the next. The rows of a
GPU tensor a nested loop walks (`for *box, conf, cls in det:` then `int(cls)`) are read
one wait per row.

Why: CUDA kernels run asynchronously: the Python loop normally runs ahead and
queues the next step's work while the GPU computes. Reading a value on the host
(`loss.item()`, printing a tensor, converting it to a number or copying it to the
CPU) blocks Python until every queued kernel has finished, so the queue drains and
the GPU idles while Python prepares the next step. Once per step this can cost a
large share of the step time on small models. The PyTorch Performance Tuning Guide
calls it "Avoid unnecessary CPU-GPU synchronization".

Bad:
    model = Net().cuda()
    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
        print(f"loss {loss.item():.4f}")

Good:
    model = Net().cuda()
    running = torch.zeros((), device="cuda")
    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
        running += loss.detach()  # stays on the GPU
        if step % 100 == 0:
            print(f"loss {running.item() / 100:.4f}")  # one sync every 100 steps
            running.zero_()

Good (Lightning):
    class Classifier(L.LightningModule):
        def training_step(self, batch, batch_idx):
            loss = self.loss(batch)
            self.log("train_loss", loss)  # the tensor: Lightning reads it when it logs
            return loss

Fix (safe): only for `.item()` on a value given to Lightning's `self.log(...)` or
`self.log_dict({...})` (not with `sync_dist=True`: Lightning reduces the value on the
device it is on, and a tensor left on the CPU cannot go through NCCL): pass the tensor
instead. Lightning turns what it logs into a detached tensor either way (a float
becomes a new tensor on the module's device: a copy to the GPU per step) and reduces it
in float32 (or float64), so the logged numbers are the same; it reads the values on the host only
when it writes logs (every `log_every_n_steps`) or refreshes a progress bar
(`prog_bar=True`: raise `TQDMProgressBar(refresh_rate=...)` too). Elsewhere no fix:
where to accumulate and how often to log is the author's choice.

Impact: low for a value the loop needs on the host to decide what to do, a NaN guard or
early stopping: a tensor an `if` tests (`if not torch.isfinite(loss):`, `if
loss.isnan().any():`), `if not math.isfinite(loss.item()):`, or `loss_value =
loss.item()` tested by an `if` of the loop (the wait is real, but the check is the
author's choice: test every N steps, or let a GradScaler skip non-finite steps). Low
for a value read in a progress report (a formatted string, or an argument of
`print`, `logger.info`, `tracker.log`...) of a step that runs a large network: 100M
parameters or more (counted, or as its pretrained model id says) or a Hugging Face
pretrained transformer, called in the loop or handed to a function it calls; beside such
a step one sync costs little. Low too for any value read in a full-batch teaching loop
(`for epoch in range(n):`, no loader, the network called on whole tensors bound before
the loop): each step is an epoch, so it syncs once per epoch. Low for a step of
networks of under 1M parameters counted from their layers: microseconds of GPU work to
wait for, nothing for the CPU to run ahead of. Low for a read once per optimizer step
of several micro-batches (outside a nested `for micro_step in range(K):` loop that runs
the backward pass, K a constant of at least 4 or a name for accumulation). A gate `if
step % N == 0:` whose N reads 1 (`log_interval = 1`) opens every step.
`torch.cuda.synchronize()` and values accumulated every step (`total += loss.item()`)
stay high; a read in the statement right after a `torch.cuda.synchronize()` is not
reported (the device is idle by then: the synchronize is the sync), nor a logger's `if
isinstance(v, torch.Tensor): v = v.item()` whose every caller, in its file or the
others, passes Python numbers (DINO's `metric_logger.update(loss=loss.item())`, each
keyword its `**kwargs` takes). In evaluation
loops: high where evaluating is the program's work (an inference or evaluation script);
low in a program that also trains (a pass between epochs is a small share of the run),
for outputs collected on the host (`.cpu()`, `.numpy()`, `.tolist()`: what metrics
computed there need), and beside a large network.

Unknown device: reported in files that use a GPU, and where a step loop moves its
batches to a device its function receives as a parameter that no visible call passes
(`def train(model, loader, optimizer, device)` in a library: training code for an
accelerator); on a CPU a host sync costs nothing, so the advice is harmless there.
Otherwise a device that cannot be named (`args.device` without a GPU default,
`tensor.device`) is not enough: silent.

Sources: PyTorch Performance Tuning Guide, "Avoid unnecessary CPU-GPU
synchronization"; CUDA semantics, "Asynchronous execution";
`torch.cuda.set_sync_debug_mode`; Lightning docs, "Speed Up Model Training", "Things
to Avoid: .item(), .numpy(), .cpu()", and `LightningModule.log` (a value may be a
float or a tensor).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from torchlint.fixes import Applicability, Fix, FixSafety, Replace, fix
from torchlint.results import Impact
from torchlint.rule import NO_GPU, Diagnostic, Rule
from torchlint.semantic import (
    HOST_READS,
    MISSING,
    CallSite,
    Kind,
    Loop,
    Placed,
    TorchModule,
    contains,
    cpu_loop,
    cpu_tensor,
    dotted_name,
    fed_numbers,
    fed_tensors,
    formats_tensor,
    left_on_host,
    legacy_read,
    legacy_reads,
    loop_tensors,
    names_read,
    names_tested,
    numpy_value,
    packed_lengths,
    per_step_functions,
    read_inside,
    registered_buffers,
    runs_once,
    tensor_rows,
    tensor_valued,
    under_full_batch,
)
from torchlint.text.walk import descendants

ADVICE = "accumulate on the device with `.detach()` and sync every N steps (`if step % N == 0:`)"
SYNCHRONIZE = "`torch.cuda.synchronize()`"
# Methods that format the values they are given (a logger's lazy `%` arguments, tqdm's
# postfix, TensorBoard's scalar): a tensor among them is read on the host.
FORMATS_ARGUMENTS = frozenset({
    "info", "debug", "warning", "error", "critical", "set_postfix", "set_description",
    "add_scalar",
})  # fmt: skip
REPORTERS = {"print", "log", "log_dict", "info", "debug", "write", "set_postfix", "add_scalar"}
REPORTS = REPORTERS | FORMATS_ARGUMENTS  # a call that is itself a progress report
HEAVY = "a progress report of a step that runs a large network, beside which one sync costs little"
FULL_BATCH = "a full-batch loop: each step is an epoch, so this syncs once per epoch"
TINY = "a step of networks of under 1M parameters: microseconds of GPU work to wait for"
COLLECTED = "outputs collected on the host for metrics computed there: one copy per batch"
HEAVY_EVAL = "an evaluation of a large network, beside whose batches one sync costs little"
BESIDE_TRAINING = "an evaluation pass of a program that trains: a small share of the run"
CPU_LOOP = "the loop runs on the CPU: its networks are kept there, its batches never moved"
PERIODIC = "it runs every N steps, under a periodic gate"
RARE = (
    "it runs once (a branch that ends the run), on another backend, or under a flag off by default"
)
DECIDES = "the value decides what runs next: a NaN guard, early stopping"
AFTER_SYNCHRONIZE = "the statement before synchronizes the device: this read waits for nothing"
DECIDES_ADVICE = (
    "test it every N steps (`if step % N == 0:`), or let a GradScaler skip non-finite steps"
)
# `loss.data[0]`: PyTorch < 0.4's spelling of `loss.item()` (`flow.legacy_reads`).
LEGACY = "`.data[0]` (PyTorch < 0.4's `.item()`)"
# Tensor predicates an `if` turns into a Python bool: the test waits for the GPU.
PREDICATES = ("isnan", "isinf", "isfinite")
# What the text of a file this rule reports in holds, at least: a backward pass called
# (`loss.backward()`, `accelerator.backward(loss)`, `self.manual_backward(loss)`), a
# Lightning `training_step`, or an evaluation (autograd off, `.eval()`, a function named
# for one: `test(`, `test_epoch(`..., not any `test_*`, which in a model zoo builds a
# network: timm's `def test_resnet(pretrained=False)`). Files where "backward" is only a
# word of a comment ("backward compatibility") or an autograd Function's
# `def backward(ctx, grad)` are not parsed for this rule.
PATTERN = re.compile(
    r"backward(?<!def backward)\s*\(|training_step|no_grad|inference_mode|\.eval\("
    r"|def _*(?:eval|valid|val(?:_|\d|\()|predict|infer)"
    r"|def _*test(?:_?(?:epoch|one_epoch|model|loop|step|net))?\("
)


class HostSyncInTrainingLoop(Rule):
    code = "TL401"
    name = "host-sync-in-training-loop"
    fix_safety = FixSafety.SAFE
    # A backward pass or a training step; an evaluation (autograd off, `.eval()`, a
    # function named for one: `EVAL_FUNCTION`).
    tokens = (
        *("backward", "training_step", "no_grad", "inference_mode", ".eval("),
        *("def eval", "def val", "def test", "def predict", "def infer", "def _eval", "def _val"),
    )
    pattern = PATTERN

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if not (module.placement.uses_gpu or module.placement.presumed_accelerator):
            self.pass_over(None, NO_GPU)
            return
        seen: set[int] = set()  # statements: one sync reported per statement
        for loop in module.step_loops:
            if cpu_loop(module, loop):
                self.pass_over(loop.node, CPU_LOOP)
                continue  # a CPU half of a notebook: nothing to wait for
            tensors, host = loop_tensors(module, loop), left_on_host(module, loop)
            tested: set[str] | None = None
            low: str | bool | None = False  # False: not yet asked
            synced: set[int] = set()  # statements right after a `torch.cuda.synchronize()`
            for call in loop.calls:
                if id(call.ctx.statement) in seen:
                    continue
                what = _sync(module, call, tensors)
                if what is None:
                    continue
                if what == SYNCHRONIZE and call.ctx.statement is not None:
                    following = module.next_statement(call.ctx.statement)
                    synced.add(id(following))
                elif id(call.ctx.statement) in synced:
                    self.pass_over(call.node, AFTER_SYNCHRONIZE)
                    continue
                if dotted_name(call.receiver) in host:
                    self.pass_over(call.node, "it reads a batch tensor the loop leaves on the CPU")
                    continue
                if module.runs.rare(call):
                    self.pass_over(call.node, PERIODIC)
                    continue
                if tested is None:
                    tested = names_tested(loop)
                if _rare(module, call, loop, what == SYNCHRONIZE):
                    self.pass_over(call.node, RARE)
                    continue
                seen.add(id(call.ctx.statement))
                if low is False:
                    low = _low(module, loop)
                why = low if isinstance(low, str) and what != SYNCHRONIZE else None
                if _decides(call, tested):
                    why = DECIDES
                if why == HEAVY and not _progress(call):
                    why = None  # accumulating a value every step: the TP case
                if why is None and what != SYNCHRONIZE:
                    why = _accumulated(module, call, loop)
                yield self._step_sync(call.node, what, why)
            for read, placed, target in legacy_reads(
                set(loop.losses), loop.assignments, loop.calls
            ):
                if id(placed.ctx.statement) in seen or module.runs.rare(placed):
                    continue
                if _rare(module, placed, loop):
                    continue
                seen.add(id(placed.ctx.statement))
                if low is False:
                    low = _low(module, loop)
                why = low if isinstance(low, str) else None
                if target in names_tested(loop):
                    why = DECIDES
                yield self._step_sync(read, LEGACY, why)
        yield from self._evaluation(module, seen)
        yield from self._step_functions(module, seen)

    def _step_functions(self, module: TorchModule, seen: set[int]) -> Iterator[Diagnostic]:
        """Syncs in the functions run every step (`per_step_functions`)."""
        logged = _logged_items(module)
        steps, ignite = module.frameworks.training_steps, module.frameworks.ignite_steps

        def syncs(function: cst.FunctionDef) -> bool:  # what another file is asked about
            buffers = registered_buffers(module, function)
            return any(_sync(module, c, buffers) for c in module.training.calls_in(function))

        for function, why in per_step_functions(module, syncs).items():
            # the names a `training_step` returns: the loss Lightning backpropagates
            tensors = (
                module.functions.returned_names(function)
                if function in steps
                else fed_tensors(module, function)
            )
            output = module.frameworks.ignite_output(function) if function in ignite else set()
            for node, what, placed in _function_syncs(module, function, tensors):
                if placed is not None:
                    if module.runs.rare(placed) or id(placed.ctx.statement) in seen:
                        continue
                    if id(placed.ctx.statement) in output:
                        continue  # the engine's output: its handlers read it every iteration
                    if any(contains(if_.test, node) for if_ in placed.ctx.ifs):
                        continue  # needed on the host to decide what runs next
                    if isinstance(placed, CallSite) and fed_numbers(
                        module, placed.receiver, placed.scope
                    ):
                        continue  # every caller passes a number: nothing to wait for
                    if isinstance(placed, CallSite) and module.runs.returned_to_tests(
                        function, placed
                    ):
                        continue  # the same, in every caller (an LR finder's divergence test)
                    if _rare(module, placed, None, what == SYNCHRONIZE):
                        continue
                    seen.add(id(placed.ctx.statement))
                log = logged.get(id(node))
                if log is not None:
                    advice = (
                        "pass the tensor to `self.log`: Lightning keeps it on the device and "
                        "reads it only when it writes logs"
                    )
                elif "Lightning" in why:
                    advice = "keep the value on the device (`self.log` takes tensors)"
                elif "ignite" in why:
                    advice = "keep the value on the device, or read it every N iterations"
                else:
                    advice = "return the tensor and sync every N steps, or keep it on the device"
                local = why.endswith("called every training step")
                why_low = FULL_BATCH if local and under_full_batch(module, function) else None
                yield self.diagnostic(
                    node,
                    f"{what} in `{function.name.value}` ({why}) blocks until the GPU has "
                    f"finished every queued kernel, on every step, so the GPU idles; {advice}"
                    + (f" (low impact: {why_low})" if why_low else ""),
                    fix=_log_tensors(log, logged) if log is not None else None,
                    impact=Impact.LOW if why_low else Impact.HIGH,
                )

    def _step_sync(self, node: cst.CSTNode, what: str, why: str | None) -> Diagnostic:
        return self.diagnostic(
            node,
            f"{what} in the training loop blocks until the GPU has finished every "
            "queued kernel, on every step, so the GPU idles; "
            + (DECIDES_ADVICE if why == DECIDES else ADVICE)
            + (f" (low impact: {why})" if why else ""),
            impact=Impact.LOW if why else Impact.HIGH,
        )

    def _evaluation(self, module: TorchModule, seen: set[int]) -> Iterator[Diagnostic]:
        """Per-batch syncs of the evaluation loops (a network run over a loader's batches
        without a backward pass): the CPU waits for each batch before it prepares the
        next. High where the evaluation is the program's work (an inference or
        evaluation script); low beside training (a pass between epochs is a small share
        of the run), for outputs collected on the host (`.cpu()`, `.numpy()`,
        `.tolist()`: what host-side metrics need) and beside a large network."""
        trains = bool(module.training_loops or module.frameworks.training_steps)
        for loop in module.evaluation_loops:
            if cpu_loop(module, loop):
                continue
            tensors, host = loop_tensors(module, loop), left_on_host(module, loop)
            for call in loop.calls:
                if id(call.ctx.statement) in seen or dotted_name(call.receiver) in host:
                    continue
                what = _sync(module, call, tensors)
                if what is None or what == SYNCHRONIZE or module.runs.rare(call):
                    continue
                if any(contains(if_.test, call.node) for if_ in call.ctx.ifs):
                    continue  # needed on the host to decide what runs next
                if _rare(module, call, loop):
                    continue
                seen.add(id(call.ctx.statement))
                why = COLLECTED if call.method in ("cpu", "numpy", "tolist") else None
                if why is None and module.workload.heavy_step(loop):
                    why = HEAVY_EVAL
                if why is None and trains:
                    why = BESIDE_TRAINING
                advice = (
                    "copy the tensor to the host once, before the loop over its rows "
                    "(`.tolist()`, `.cpu()`)"
                    if why is None and set(names_read(call.node)) & tensor_rows(loop, tensors)
                    else "accumulate on the device (`total += loss.detach()`) and read the "
                    "total once after the loop"
                )
                yield self.diagnostic(
                    call.node,
                    f"{what} in the evaluation loop blocks until the GPU has finished each "
                    f"batch, so the GPU idles while the next batch is prepared; {advice}"
                    + (f" (low impact: {why})" if why else ""),
                    impact=Impact.LOW if why else Impact.HIGH,
                )


def _rare(module: TorchModule, call: Placed, loop: Loop | None, timing: bool = False) -> bool:
    """The call does not run every step: in a branch that ends the run or leaves the loop
    (`if not torch.isfinite(loss): print(loss.item()); sys.exit(1)`), or under a flag that
    is off by default: any for `torch.cuda.synchronize()` (`if args.synchronize_step:`),
    one for timing, profiling or debugging for a value read (`if args.profile:`; not
    `if args.with_tracking:`, a mode users run with)."""
    if runs_once(call, loop.node if loop is not None else None):
        return True
    if module.runs.other_backend(call.ctx, call.node):
        return True  # `if mps: prediction = prediction.cpu()`: not on the CUDA path
    return module.runs.opt_in(call.ctx, call.node, named=not timing)


def _progress(call: CallSite) -> bool:
    """The value read goes into a progress message: a formatted string, or an argument
    of `print(...)`, `accelerator.print(...)`, `logger.info(...)`, `tracker.log(...)`."""
    statement = call.ctx.statement
    if statement is None:
        return False
    if (call.method or call.qualname or "") in REPORTS:
        return True  # the call is the report (`log.info(f"{loss}")`)
    for node in descendants(statement):
        if isinstance(node, cst.FormattedString) and contains(node, call.node):
            return True
        if isinstance(node, cst.Call) and any(contains(a.value, call.node) for a in node.args):
            name = dotted_name(node.func) or ""
            if name.rsplit(".", 1)[-1] in REPORTERS:
                return True
    return False


def _low(module: TorchModule, loop: Loop) -> str | None:
    """Why a per-step sync of the loop gains little to remove, if it does."""
    if module.workload.heavy_step(loop):
        return HEAVY
    if module.workload.tiny_step(loop):
        return TINY
    return FULL_BATCH if module.workload.full_batch(loop) else None


def _accumulated(module: TorchModule, call: CallSite, loop: Loop) -> str | None:
    """Why the call runs once per optimizer step of several micro-batches, if it does."""
    count = module.workload.micro_batches(loop, call.node)
    if count is None:
        return None
    return f"once per optimizer step of {count or 'several'} micro-batches"


def _sync(module: TorchModule, call: CallSite, tensors: set[str]) -> str | None:
    """What makes this call a host sync, or None."""
    node = call.node
    if call.qualname == "torch.cuda.synchronize":
        return SYNCHRONIZE
    method = call.method
    torch_form = (call.qualname or "").removeprefix("torch.") in PREDICATES
    if torch_form or (call.qualname is None and method in PREDICATES):
        if any(contains(if_.test, node) for if_ in call.ctx.ifs):
            return "a tensor tested by `if`"
        return None
    if method in HOST_READS and call.receiver is not None:
        if method == "numpy" and not _forced(call):
            return None  # `.numpy()` works on CPU tensors only: the copy is elsewhere
        if method != "numpy" and node.args:
            return None  # not the tensor method (`arr.item(0)`, `x.cpu(memory_format)`)
        if numpy_value(module, call.receiver, call.scope) or read_inside(call.receiver):
            return None
        if cpu_tensor(module, call.receiver, call.scope):
            return None
        if packed_lengths(module, call):
            return None  # `pack_padded_sequence` wants its lengths on the CPU
        return f"`.{method}()`"
    if call.qualname in ("float", "int"):  # the builtins, not shadowed
        if any(a.keyword is None and tensor_valued(a.value, tensors) for a in node.args):
            return f"`{call.qualname}()` of a tensor"
        return None
    printed = call.qualname == "print"
    callee = "print" if printed else dotted_name(node.func) or ""
    takes = printed or callee.rsplit(".", 1)[-1] in FORMATS_ARGUMENTS
    for arg in node.args:
        if formats_tensor(arg.value, tensors):
            return f"a tensor formatted for `{callee}()`" if callee else "a tensor formatted"
        direct = takes and (arg.keyword is None or not printed)
        if direct and tensor_valued(arg.value, tensors):
            return f"`{callee}()` of a tensor"
    return None


def _decides(call: CallSite, tested: set[str]) -> bool:
    """The value read is needed on the host to decide what runs next: the call is in an
    `if` test (`if not math.isfinite(loss.item()):`), or it is assigned to a name that an
    `if`/`while` of the loop tests (a NaN guard, early stopping)."""
    if any(contains(if_.test, call.node) for if_ in call.ctx.ifs):
        return True
    statement = call.ctx.statement
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        if isinstance(small, cst.Assign) and contains(small.value, call.node):
            targets = {n for t in small.targets for n in names_read(t.target)}
            if targets & tested:
                return True
    return False


def _forced(call: CallSite) -> bool:
    value = call.kwarg("force")
    return isinstance(value, cst.Name) and value.value == "True"


def _function_syncs(
    module: TorchModule, function: cst.FunctionDef, tensors: set[str]
) -> Iterator[tuple[cst.CSTNode, str, Placed | None]]:
    """The host syncs of a function run every step: its calls that sync, and `x.data[0]`
    of a loss it backpropagates, in a statement or in a value it returns (`return
    loss.data[0] / len(x)`), with where each sits (None for a returned value)."""
    calls = module.training.calls_in(function)
    for call in calls:
        what = _sync(module, call, tensors)
        if what is not None:
            yield call.node, what, call
    losses = {
        c.receiver.value
        for c in calls
        if isinstance(c.receiver, cst.Name) and module.training.is_backward(c)
    }
    if not losses:
        return
    scope = module.functions.scope_of(function)
    bindings = [b for s in scope.symbols.values() for b in s.bindings if b.kind is Kind.ASSIGN]
    found: set[int] = set()
    for read, placed, _ in legacy_reads(losses, bindings, calls):
        found.add(id(read))
        yield read, LEGACY, placed
    for value in module.functions.returns(function):
        returned = next((n for n in descendants(value) if legacy_read(n, losses)), None)
        if isinstance(returned, cst.Subscript) and id(returned) not in found:
            yield returned, LEGACY, None


def _logged_items(module: TorchModule) -> dict[int, cst.Call]:
    """`x.item()` given as a value to `self.log(name, value)` / `self.log_dict({...})` in
    a LightningModule of the file: id of the `.item()` call -> the log call."""
    classes = {id(c.node) for c in module.frameworks.lightning_modules}
    found: dict[int, cst.Call] = {}
    for call in module.method_calls("log", "log_dict"):
        receiver = call.receiver
        if not (isinstance(receiver, cst.Name) and receiver.value == "self"):
            continue
        if call.ctx.class_ is None or id(call.ctx.class_) not in classes:
            continue
        sync = call.kwarg("sync_dist")
        if sync is not MISSING and not (isinstance(sync, cst.Name) and sync.value == "False"):
            continue  # reduced across processes where it lies: NCCL cannot reduce a CPU tensor
        if call.method == "log":
            values = [call.arg("value", ("name", "value"))]
        else:
            given = call.arg("dictionary", ("dictionary",))
            values = [e.value for e in given.elements] if isinstance(given, cst.Dict) else []
        for value in values:
            if (
                isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute)
                and value.func.attr.value == "item"
                and not value.args
                and not numpy_value(module, value.func.value, call.scope)
            ):
                found[id(value)] = call.node
    return found


def _log_tensors(log: cst.Call, logged: dict[int, cst.Call]) -> Fix:
    """Drop `.item()` from every value of one `self.log`/`self.log_dict` call."""
    items = [n for n in descendants(log) if isinstance(n, cst.Call) and logged.get(id(n)) is log]
    return fix(
        "Log the tensor: drop `.item()`",
        Applicability.SAFE,
        *(Replace(n, n.func.value) for n in items if isinstance(n.func, cst.Attribute)),
    )
