"""CG1xx: host synchronization. The CPU waits for a GPU value, which capture cannot record."""

from __future__ import annotations

import ast

from cgkit.check.facts import CPU, is_tensor
from cgkit.check.model import Rule
from cgkit.check.rules._base import Calls, Each, Family, code, found, is_true, text_of

_GRAPH_NOTE = (
    "Under manual capture (`torch.cuda.graph`, `capture_begin`, `make_graphed_callables`) the "
    "capturing stream may not be synchronized with the host, so capture is invalidated and fails, "
    "usually with a generic error that does not name this line. Under `torch.compile` the value "
    "forces a graph break, and the graph is split there."
)

RULES = Family()


@RULES.rule(
    Rule(
        code="CG101",
        name="tensor-item",
        category="host-sync",
        message="`.item()` reads a GPU value on the host; capture fails here",
        compile_message="`.item()` reads a GPU value on the host: graph break (the graph is split here)",
        fix="Keep the value as a 0-dim tensor and use it in tensor ops; read it after `replay()` if the host needs it.",
        what="Checks for `.item()` on a tensor inside a captured region.",
        why="`.item()` copies one element to the host and waits for the GPU to produce it. " + _GRAPH_NOTE,
        example=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x / x.abs().max().item()
        """),
        use_instead=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x / x.abs().max()  # a 0-dim tensor, stays on the GPU
            g.replay()
        """),
        gpu_check="ok = torch.allclose(y, x / x.abs().max())",
    ),
    Calls(methods=("item",)),
)
def tensor_item(c, f):
    """``x.item()`` on a value that is not a known object."""
    if not c.node.args and type(c.recv) is not tuple:
        yield found(c.node, c.stmt)


@RULES.rule(
    Rule(
        code="CG102",
        name="tensor-to-host",
        category="host-sync",
        message="`{what}` copies a tensor to the host and waits for it; capture fails here",
        compile_message="`{what}` copies a tensor to the host: graph break (or a CPU partition) here",
        fix="Keep the data on the GPU inside the region; copy the output to the host after `replay()`.",
        what="Checks for `.cpu()`, `.numpy()`, `.tolist()` and `.to(\"cpu\")` inside a captured region.",
        why="A device-to-host copy into pageable memory blocks until the GPU has produced the data. "
        + _GRAPH_NOTE
        + " Even where a copy could be recorded, the host code that reads the result runs only once, "
        "during capture.",
        example=code("""
            import torch

            logits = torch.randn(8, 10, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                probs = logits.softmax(-1).cpu()
        """),
        use_instead=code("""
            import torch

            logits = torch.randn(8, 10, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                probs = logits.softmax(-1)
            g.replay()
            host_probs = probs.cpu()  # after the replay, outside the graph
        """),
    ),
    Calls(methods=("cpu", "numpy", "tolist", "to")),
)
def tensor_to_host(c, f):
    """``.cpu()``, ``.numpy()``, ``.tolist()`` and a blocking ``.to("cpu")`` of a value that may be on the GPU."""
    m, recv = c.meth, c.recv
    if m in ("cpu", "numpy", "tolist"):  # methods of tensors (and arrays): any value not known otherwise
        if type(recv) is not tuple and recv is not CPU:
            yield found(c.node, c.stmt, what=f".{m}()")
    elif is_tensor(recv) and recv is not CPU and _to_cpu_blocking(c.node):
        yield found(c.node, c.stmt, what='.to("cpu")')


def _to_cpu_blocking(node: ast.Call) -> bool:
    target = node.args[0] if node.args else None
    for kw in node.keywords:
        if kw.arg == "device":
            target = kw.value
        if kw.arg == "non_blocking" and is_true(kw.value):
            return False
    if target is None:
        return False
    if type(target) is ast.Constant and isinstance(target.value, str):
        return target.value.split(":")[0] == "cpu"
    if type(target) is ast.Call and target.args:
        arg = target.args[0]
        return type(arg) is ast.Constant and arg.value == "cpu"
    return False


_TO_SCALAR = {"builtins.bool": "bool()", "builtins.int": "int()", "builtins.float": "float()", "builtins.complex": "complex()"}


@RULES.rule(
    Rule(
        code="CG103",
        name="tensor-to-python-scalar",
        category="host-sync",
        message="`{what}` of a tensor converts it to a Python value on the host; capture fails here",
        compile_message="`{what}` of a tensor converts it to a Python value: graph break here",
        fix="Keep the tensor; replace Python arithmetic on it with tensor ops.",
        what="Checks for `bool()`, `int()`, `float()` and `complex()` applied to a tensor in a captured region.",
        why="Converting a GPU tensor to a Python number reads it on the host, exactly like `.item()`. "
        + _GRAPH_NOTE,
        example=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                scale = float(x.norm())
                y = x / scale
        """),
        use_instead=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x / x.norm()
            g.replay()
        """),
        gpu_check="ok = torch.allclose(y, x / x.norm())",
    ),
    Calls(quals=tuple(_TO_SCALAR)),
)
def tensor_to_python_scalar(c, f):
    node = c.node
    kind = f.infer(node.args[0]) if node.args else None
    if is_tensor(kind) and kind is not CPU:  # ``int(C[q, 0])`` of a CPU constant table waits for no GPU
        yield found(node, c.stmt, what=_TO_SCALAR[c.qual])


_SYNC_FUNCS = {
    "torch.cuda.synchronize": "torch.cuda.synchronize()",
    "torch.accelerator.synchronize": "torch.accelerator.synchronize()",
    "torch.cuda.current_stream().synchronize": "torch.cuda.current_stream().synchronize()",
}


@RULES.rule(
    Rule(
        code="CG104",
        name="explicit-synchronize",
        category="host-sync",
        message="`{what}` waits for the GPU; capture fails here",
        compile_message="`{what}` waits for the GPU: graph break here",
        fix="Remove the synchronization from the region; synchronize (if at all) after `replay()`.",
        what="Checks for `torch.cuda.synchronize()`, `Stream.synchronize()` and `Event.synchronize()` in a captured region.",
        why="An explicit synchronization blocks the host until queued work finishes. A capturing "
        "stream runs nothing, so there is nothing to wait for: the CUDA runtime rejects the call and "
        "invalidates the capture. `torch.cuda.synchronize()` is not reported by "
        "`torch.cuda.set_sync_debug_mode`, so a runtime check does not find it either.",
        example=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x * 2
                torch.cuda.synchronize()
        """),
        use_instead=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x * 2
            g.replay()
            torch.cuda.synchronize()  # outside the graph
        """),
        gpu_check="ok = torch.equal(y, x * 2)",
    ),
    Calls(methods=("synchronize",), quals=tuple(_SYNC_FUNCS)),
)
def explicit_synchronize(c, f):
    if c.qual is not None:
        yield found(c.node, c.stmt, what=_SYNC_FUNCS[c.qual])
    elif not is_tensor(c.recv):
        yield found(c.node, c.stmt, what=f"{text_of(c.node.func.value)}.synchronize()")


@RULES.rule(
    Rule(
        code="CG105",
        name="stream-query",
        category="host-sync",
        message="`{what}` asks the GPU whether work has finished; capture fails here",
        compile_message="`{what}` asks the GPU whether work has finished: graph break here",
        fix="Remove the query from the region.",
        what="Checks for `Stream.query()` and `Event.query()` inside a captured region.",
        why="A query inspects the progress of a stream from the host. Querying a stream that is "
        "being captured is illegal and invalidates the capture, although it does not block.",
        example=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x * 2
                done = torch.cuda.current_stream().query()
        """),
        use_instead=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x * 2
            g.replay()
            done = torch.cuda.current_stream().query()  # outside the graph
        """),
    ),
    Calls(methods=("query",)),
)
def stream_query(c, f):
    if type(c.recv) is tuple and c.recv[0] in ("stream", "event"):
        yield found(c.node, c.stmt, what=f"{text_of(c.node.func.value)}.query()")


_TO_STRING = {"builtins.str": "`str()`", "builtins.repr": "`repr()`", "builtins.format": "`format()`"}


@RULES.rule(
    Rule(
        code="CG106",
        name="tensor-to-string",
        category="host-sync",
        message="{what} formats a tensor's values on the host; capture fails here",
        compile_message="{what} formats a tensor's values on the host: graph break here",
        compile_category="host-code",  # under torch.compile: host code that breaks the graph (like print, CG401)
        fix="Print or log outside the region, from the output tensor after `replay()`.",
        what="Checks for `print(tensor)`, `str()`/`repr()`/`format()` of a tensor and f-strings that format a tensor.",
        why="Formatting a tensor copies its values to the host, which synchronizes. "
        + _GRAPH_NOTE
        + " And even if it did not fail, a print inside a graph runs once, at capture.",
        example=code("""
            import torch

            x = torch.randn(4, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x.relu()
                print(y)
        """),
        use_instead=code("""
            import torch

            x = torch.randn(4, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x.relu()
            g.replay()
            print(y)  # after the replay
        """),
    ),
    Calls(quals=("builtins.print", *_TO_STRING)),
)
def tensor_to_string(c, f):
    node = c.node
    if c.qual == "builtins.print":
        if any(is_tensor(f.infer(a)) for a in node.args):
            yield found(node, c.stmt, what="`print()` of a tensor")
    elif node.args and is_tensor(f.infer(node.args[0])):
        yield found(node, c.stmt, what=_TO_STRING[c.qual])


@RULES.also("CG106", Each("fstrings"))
def tensor_in_fstring(item, f):
    value, stmt = item
    if is_tensor(f.infer(value.value)) or _backpropagated(f, value.value):
        yield found(value.value, stmt, what="an f-string")


def _backpropagated(f, expr) -> bool:
    """``loss`` of ``loss.backward()`` in the same function: a tensor, whatever made it (a criterion
    object of unknown type)."""
    return type(expr) is ast.Name and any(
        c.meth == "backward" and type(c.node.func.value) is ast.Name and c.node.func.value.id == expr.id for c in f.calls)


@RULES.rule(
    Rule(
        code="CG107",
        name="host-comparison",
        category="host-sync",
        message="`{what}` returns a Python bool computed from GPU values; capture fails here",
        compile_message="`{what}` returns a Python bool computed from GPU values: graph break here",
        fix="Use `torch.isclose(a, b).all()` or `(a == b).all()`, which stay on the GPU as a tensor.",
        what="Checks for `torch.allclose` and `torch.equal` (and the tensor methods) inside a captured region.",
        why="These functions return a Python `bool`, so they read the comparison result on the host. "
        + _GRAPH_NOTE,
        example=code("""
            import torch

            a = torch.randn(64, device="cuda")
            b = a * (1 + 1e-6)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                same = torch.allclose(a, b)
        """),
        use_instead=code("""
            import torch

            a = torch.randn(64, device="cuda")
            b = a * (1 + 1e-6)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                same = torch.isclose(a, b).all()  # a bool tensor on the GPU
            g.replay()
        """),
        # Close on every element whatever randn draws; then the replay must follow new data.
        gpu_check="ok = bool(same)\nb.add_(1.0)\ng.replay()\nok = ok and not bool(same)",
    ),
    Calls(methods=("allclose", "equal"), quals=("torch.allclose", "torch.equal")),
)
def host_comparison(c, f):
    if c.qual is not None:
        yield found(c.node, c.stmt, what=c.qual)
    elif is_tensor(c.recv):
        yield found(c.node, c.stmt, what=f"Tensor.{c.meth}")


@RULES.rule(
    Rule(
        code="CG108",
        name="grad-clip-nonfinite-check",
        category="host-sync",
        message="`{what}` with `error_if_nonfinite=True` tests the norm on the host; capture fails here",
        compile_message="`{what}` with `error_if_nonfinite=True` tests the norm on the host: graph break here",
        fix="Drop `error_if_nonfinite=True` inside the region (the default is sync-free); check the returned norm after `replay()`.",
        what="Checks for gradient clipping with `error_if_nonfinite=True` inside a captured region.",
        why="`torch.nn.utils.clip_grad_norm_` is sync-free by default, but with `error_if_nonfinite=True` "
        "it evaluates an `if` on the total norm, which reads it on the host. " + _GRAPH_NOTE,
        example=code("""
            import torch

            w = torch.nn.Parameter(torch.randn(64, device="cuda"))
            w.grad = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                norm = torch.nn.utils.clip_grad_norm_([w], 1.0, error_if_nonfinite=True)
        """),
        use_instead=code("""
            import torch

            w = torch.nn.Parameter(torch.randn(64, device="cuda"))
            w.grad = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                norm = torch.nn.utils.clip_grad_norm_([w], 1.0)
            g.replay()
            assert torch.isfinite(norm)  # checked on the host, after the replay
        """),
    ),
    Calls(qualified=True),
)
def grad_clip_nonfinite_check(c, f):
    q = c.qual
    if q.endswith((".clip_grad_norm_", ".clip_grad_norm")) and q.startswith("torch.nn.utils"):
        flag = c.kwarg("error_if_nonfinite")
        if flag is None and len(c.node.args) >= 4:
            flag = c.node.args[3]
        if is_true(flag):
            yield found(c.node, c.stmt, what=q.rsplit(".", 1)[-1])


# torch.optim classes that set `_step_supports_amp_scaling` when built with fused=True: GradScaler.step
# hands them the scale and found-inf tensors and skips `_maybe_opt_step` (its `.item()`).
_SCALING_FUSED_OPTIMIZERS = frozenset("Adam AdamW SGD Adagrad".split())


@RULES.rule(
    Rule(
        code="CG109",
        name="grad-scaler-in-region",
        category="host-sync",
        message="`{what}` reads the inf/NaN check on the host before stepping the optimizer{detail}; capture fails here",
        compile_message="`{what}` reads the inf/NaN check on the host: graph break here",
        fix="Capture forward and backward only; call `scaler.step(optimizer)` and `scaler.update()` after "
        "`replay()`. Or build the optimizer with `fused=True` (Adam, AdamW, SGD, Adagrad): GradScaler then "
        "steps it without reading anything on the host.",
        what="Checks for `GradScaler.step(optimizer)` inside a captured region, unless the optimizer is "
        "a `torch.optim` Adam, AdamW, SGD or Adagrad built with `fused=True` (or with a `fused` value or "
        "`**kwargs` the checker cannot read). "
        "`GradScaler.update()` and `unscale_()` are not reported: they work on the device.",
        why="`GradScaler.step` decides whether to step in `_maybe_opt_step`, which sums the per-device "
        "found-inf flags with `.item()`: a host read. " + _GRAPH_NOTE + " An optimizer that applies the "
        "scale itself (`fused=True` Adam, AdamW, SGD and Adagrad set `_step_supports_amp_scaling`) is "
        "stepped without `_maybe_opt_step`: GradScaler hands it the scale and found-inf tensors. "
        "`unscale_()` unscales and checks on the device, and `update()` updates the scale with "
        "`torch._amp_update_scale_` on the device, so neither reads the host. Measured on one H200, "
        "torch 2.11 (benchmarks/RESULTS.md): a whole fp16 step with GradScaler and a capturable AdamW "
        "failed capture; the same step with `fused=True` captured and its parameters matched eager "
        "(one case, scale 65536, no step with inf gradients seen).",
        example=code("""
            import torch

            model = torch.nn.Linear(8, 8).cuda()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler("cuda")
            x = torch.randn(4, 8, device="cuda")
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    scaler.scale(model(x).sum()).backward()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                scaler.scale(model(x).sum()).backward()
                scaler.step(opt)
                scaler.update()
        """),
        use_instead=code("""
            import torch

            model = torch.nn.Linear(8, 8).cuda()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler("cuda")
            x = torch.randn(4, 8, device="cuda")
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    scaler.scale(model(x).sum()).backward()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                scaler.scale(model(x).sum()).backward()
            g.replay()
            scaler.step(opt)  # outside the graph
            scaler.update()
        """),
    ),
    Calls(any_methods=("step",)),
)
def grad_scaler_in_region(c, f):
    node = c.node
    recv = c.recv if c.qual is None else f.infer(node.func.value)
    if not _is_scaler(recv, node):
        return
    opt = node.args[0] if node.args and type(node.args[0]) is not ast.Starred else None
    if opt is None:
        opt = next((kw.value for kw in node.keywords if kw.arg == "optimizer"), None)
    kind = f.infer(opt) if opt is not None else None
    if type(kind) is tuple and kind[0] == "optim":
        cls = kind[1].rsplit(".", 1)[-1]
        fused = _fused(kind[2])
        if cls in _SCALING_FUSED_OPTIMIZERS and fused is not False:
            return  # fused=True, or **kwargs: cannot tell
        detail = f" `{text_of(opt)}` ({cls}, not fused)"
    else:
        detail = f" `{text_of(opt)}` (unless it is a fused optimizer)" if opt is not None else ""
    yield found(node, c.stmt, what=f"{text_of(node.func.value)}.{c.meth}()", detail=detail)


def _fused(ctor) -> bool | None:
    """True when the constructor passes ``fused=True``; None when it cannot be told (``**kwargs``)."""
    for kw in getattr(ctor, "keywords", ()):
        if kw.arg == "fused":
            return True if is_true(kw.value) else (None if type(kw.value) is not ast.Constant else False)
        if kw.arg is None:
            return None
    return False


def _is_scaler(recv, node) -> bool:
    if type(recv) is tuple:
        return recv[0] == "scaler"
    value = node.func.value
    name = value.attr if type(value) is ast.Attribute else getattr(value, "id", "")
    return "scaler" in name.lower()
