"""CG3xx: host-to-device transfers and memory management inside a region."""

from __future__ import annotations

import ast

from cgkit.check.callers import argument_for, call_sites
from cgkit.check.facts import CPU, TENSOR, _device_literal, facts_of, is_tensor
from cgkit.check.model import Rule
from cgkit.check.names import bound_values
from cgkit.check.project import FuncRef
from cgkit.check.rules._base import Calls, Each, Family, code, found, is_true, text_of

_COPY_NOTE = (
    "During capture PyTorch refuses copies between a CUDA tensor and a CPU tensor that is not "
    "pinned (\"Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the CPU "
    "tensor is pinned\"). Under `torch.compile` the copy is not captured: it stays in an eager partition."
)

RULES = Family()

_TENSOR_FROM_DATA = ("torch.tensor", "torch.as_tensor", "torch.asarray")


@RULES.rule(
    Rule(
        code="CG301",
        name="tensor-from-host-data",
        category="host-sync",  # Python data made into a host tensor and copied, blocking, to the GPU (like CG303)
        message="`{what}` builds a GPU tensor from host data: a pageable host-to-device copy; capture fails here",
        compile_message="`{what}` builds a GPU tensor from a host array: cudagraph trees record no CUDA graph for "
        "the function (measured on torch 2.11)",
        fix="Create the tensor once before capture and reuse it (update it with `copy_()` or `fill_()` between replays).",
        what="Checks for `torch.tensor(...)` with a non-CPU `device=` inside a captured region (and `torch.as_tensor(...)` "
        "of a list or tuple written in the code; of an array it is CG302); in a CUDA-graph compiled function, only when "
        "the data is not a list or tuple written in the code (in the call, or at the top of the module and never set "
        "again: `EDGES`, `CFG[\"edges\"]`).",
        why="The data starts in Python objects on the host, so creating the GPU tensor is a copy from "
        "pageable memory. " + _COPY_NOTE + " Even if such a copy were recorded, the graph would replay "
        "the values seen at capture. Under `torch.compile(mode=\"reduce-overhead\")` (measured on an H200 with "
        "torch 2.11, benchmarks/compile_hazards.py) a tensor built from a list of Python numbers compiled once "
        "and was recorded as a CUDA graph (Dynamo makes it a constant; numbers that change are CG404's "
        "business); an array is CG302's case.",
        example=code("""
            import torch

            x = torch.randn(2, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                w = torch.tensor([0.5, 2.0], device="cuda")
                y = x * w
        """),
        use_instead=code("""
            import torch

            x = torch.randn(2, device="cuda")
            w = torch.tensor([0.5, 2.0], device="cuda")  # created once, before capture
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x * w
            g.replay()
        """),
        gpu_check="ok = torch.allclose(y, x * torch.tensor([0.5, 2.0], device='cuda'))",
    ),
    Calls(quals=_TENSOR_FROM_DATA),
)
def tensor_from_host_data(c, f):
    data = _host_data_to_gpu(c, f)
    if data is not None and not _host_array(c, data):
        # a list or tuple written out: Dynamo folds it into the compiled graph as a constant
        written = type(data) in (ast.List, ast.Tuple, ast.ListComp) or _module_constant(f, data)
        yield found(c.node, c.stmt, what=f"{c.qual}(..., device={text_of(c.kwarg('device'))})", manual_only=written)


def _module_constant(f, data) -> bool:
    """A list or tuple written at the top of the module and never rebound: ``EDGES = (5.0, 20.0)`` read as
    ``EDGES``, or an entry of a module-level dict (``CFG = {"edges": (5.0, 20.0)}`` read as ``CFG["edges"]``)
    that no code of the file sets again. Dynamo reads it as a constant, like a list written in the call."""
    key = None
    if type(data) is ast.Subscript and type(data.slice) is ast.Constant:
        key, data = data.slice.value, data.value
    if type(data) is not ast.Name or data.id in f.params or any(s.name == data.id for s in f.stores):
        return False
    tree = f.module.tree
    values = [st.value for st in tree.body if type(st) is ast.Assign
              and any(type(t) is ast.Name and t.id == data.id for t in st.targets)]
    if len(values) != 1:
        return False
    value = values[0]
    if key is not None:
        if type(value) is not ast.Dict:
            return False
        value = next((v for k, v in zip(value.keys, value.values, strict=True)
                      if type(k) is ast.Constant and k.value == key), None)
        if any(type(t) is ast.Subscript and type(t.value) is ast.Name and t.value.id == data.id
               and type(t.slice) is ast.Constant and t.slice.value == key
               for node in ast.walk(tree) if type(node) in (ast.Assign, ast.AugAssign)
               for t in (node.targets if type(node) is ast.Assign else [node.target])):
            return False
    return type(value) in (ast.List, ast.Tuple) and all(type(e) is ast.Constant for e in value.elts)


def _host_data_to_gpu(c, f):
    """The data of ``torch.tensor(data, device=<a GPU>)`` (or ``as_tensor``/``asarray``) when it is no GPU
    tensor, else None."""
    device = c.kwarg("device")
    data = c.node.args[0] if c.node.args else None
    if device is None or _device_literal(device) in ("cpu", "meta") or data is None or is_tensor(f.infer(data)):
        return None
    return data


def _host_array(c, data) -> bool:
    """``torch.as_tensor(self.mean_np, device=...)``: an array already in host memory (not Python data written
    in the code), copied from pageable memory: CG302's case."""
    return c.qual != "torch.tensor" and type(data) not in (ast.List, ast.Tuple, ast.ListComp, ast.Constant)


@RULES.rule(
    Rule(
        code="CG302",
        name="pageable-host-to-device",
        category="pinned-memory",
        message="`{what}` copies a host tensor to the GPU inside the region; capture fails here",
        compile_message="`{what}` copies a host tensor to the GPU: the copy is not captured",
        fix="Give the graph a static GPU input tensor and `copy_()` new data into it before each `replay()`.",
        what="Checks for `.cuda()` / `.to(\"cuda\")` (with or without `non_blocking=True`) on a host tensor inside a captured "
        "region, and for `torch.as_tensor(array, device=\"cuda\")` of an array held in host memory (a NumPy array, an "
        "attribute) rather than Python data written in the code (that is CG301).",
        why="Moving a CPU tensor to the GPU inside the region copies from pageable memory. " + _COPY_NOTE
        + " `non_blocking=True` does not help: from pageable memory the copy is still staged through "
        "the host, and sync debug mode does not flag it. `torch.as_tensor(array, device=\"cuda\")` is the same "
        "copy; under `torch.compile(mode=\"reduce-overhead\")` (measured on an H200 with torch 2.11, "
        "benchmarks/compile_hazards.py) `torch.as_tensor` of a NumPy array made in the function recorded no CUDA "
        "graph at all.",
        example=code("""
            import torch

            host = torch.randn(64)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = host.cuda() * 2
        """),
        use_instead=code("""
            import torch

            host = torch.randn(64)
            static = torch.empty(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = static * 2
            static.copy_(host)  # before each replay, outside the graph
            g.replay()
        """),
        gpu_check="ok = torch.allclose(y, host.cuda() * 2)",
    ),
    Calls(methods=("cuda", "to"), quals=_TENSOR_FROM_DATA),
)
def pageable_host_to_device(c, f):
    if c.qual in _TENSOR_FROM_DATA:
        data = _host_data_to_gpu(c, f)
        if data is not None and _host_array(c, data):
            yield found(c.node, c.stmt, what=f"{c.qual}({text_of(data)}, device={text_of(c.kwarg('device'))})")
        return
    if _host_to_device(f, c):
        yield found(c.node, c.stmt, what=f".{c.meth}({_args_text(c.node)})")


def _host_to_device(f, c) -> bool:
    """``x.cuda()`` / ``x.to(cuda)`` where x may live on the host (not a known GPU tensor or module)."""
    node = c.node
    recv = c.recv
    if type(recv) is tuple or recv is TENSOR:
        return False
    value = node.func.value
    if _chain_has_pin(value):
        return False
    if c.meth == "to":
        target = node.args[0] if node.args else c.kwarg("device")
        if target is None:
            return False
        literal = _device_literal(target)
        if literal == "cuda":
            return recv is CPU or recv is None
        if literal is not None:
            return False
        target_qual = f.qual(target)
        if target_qual is not None and target_qual != "torch.device":
            return False  # a dtype such as torch.float16, or a module-level constant
        kind = f.infer(target)
        if type(kind) is tuple and kind[0] == "device" and kind[1]:
            return recv is CPU or recv is None
        if is_tensor(kind) or (type(kind) is tuple and kind[0] != "device"):
            return False
        return recv is CPU  # .to(device) with a device we cannot read: only when the source is on the host
    return recv is CPU or recv is None


def _chain_has_pin(node) -> bool:
    while type(node) is ast.Call and type(node.func) is ast.Attribute:
        if node.func.attr == "pin_memory":
            return True
        node = node.func.value
    return False


def _args_text(node: ast.Call) -> str:
    parts = [text_of(a) for a in node.args] + [f"{k.arg}={text_of(k.value)}" for k in node.keywords if k.arg]
    text = ", ".join(parts)
    return text if len(text) <= 40 else "..."


@RULES.rule(
    Rule(
        code="CG303",
        name="host-index",
        category="host-sync",  # the list becomes a host tensor that is copied, blocking, to the GPU
        message="indexing a GPU tensor with {what} copies the index to the GPU; capture fails here",
        compile_message="indexing a GPU tensor with {what}: the index copy is not captured",
        fix="Build the index as a GPU tensor once, before capture, and index with it.",
        what="Checks for indexing a GPU tensor with a Python list (a literal, or a name or attribute only ever "
        "bound to lists, also a field a settings class declares a list: `montage: list = field(...)`) or a CPU "
        "tensor inside a captured region, also as one part of a multi-dimensional index.",
        why="Advanced indexing needs the index on the device, so a list or CPU index tensor is copied "
        "to the GPU from pageable memory on every call. " + _COPY_NOTE,
        example=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                picked = x[[0, 5, 9]]
        """),
        use_instead=code("""
            import torch

            x = torch.randn(64, device="cuda")
            idx = torch.tensor([0, 5, 9], device="cuda")  # once, before capture
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                picked = x[idx]
            g.replay()
        """),
        gpu_check="ok = torch.equal(picked, x[[0, 5, 9]])",
    ),
    Each("indexings"),
)
def host_index(item, f):
    sub, stmt = item
    parts = sub.slice.elts if type(sub.slice) is ast.Tuple else [sub.slice]  # ``x[:, [1, 2]]``
    for index in parts:
        what = _host_index(index, f)
        if what is not None:
            value = f.infer(sub.value)
            # Only arrays take a list beside a slice (``x[:, idx]``): a value of unknown type indexed so is one.
            sliced = value is None and what == "a Python list" and any(type(p) is ast.Slice for p in parts)
            if (is_tensor(value) and value is not CPU) or sliced:
                yield found(sub, stmt, what=what)
            return


def _host_index(index, f) -> str | None:
    """What a host index is (``a Python list``, ``a CPU tensor``), or None for a slice, an int or a GPU index."""
    if type(index) is ast.Slice:
        return None
    if _is_list(index) or _bound_to_lists(index, f):
        return "a Python list"
    return "a CPU tensor" if f.infer(index) is CPU else None


def _binds(stmt, name: str) -> bool:
    """``name = value`` (or ``name: T = value``): the statement gives the name its value directly."""
    if type(stmt) is ast.Assign:
        return any(type(t) is ast.Name and t.id == name for t in stmt.targets)
    return type(stmt) is ast.AnnAssign and type(stmt.target) is ast.Name and stmt.target.id == name \
        and stmt.value is not None


def _is_list(expr) -> bool:
    """A list literal or comprehension, ``list(...)``/``sorted(...)``, or ``given or list(range(n))``."""
    if type(expr) in (ast.List, ast.ListComp):
        return True
    if type(expr) is ast.BoolOp and type(expr.op) is ast.Or:
        return any(_is_list(v) for v in expr.values)
    return type(expr) is ast.Call and type(expr.func) is ast.Name and expr.func.id in ("list", "sorted")


def _bound_to_lists(index, f) -> bool:
    """A local name, a module-level name, or an attribute of ``self``, that every assignment binds to a
    list; an attribute set from a constructor parameter counts when every construction in view passes a
    list (or the parameter's default is one)."""
    if type(index) is ast.Name:  # ``name = [...]`` itself (not a comprehension's or a loop's variable)
        values = [s.node.value if _binds(s.node, index.id) else None for s in f.stores if s.name == index.id]
        if not values and index.id not in f.params:  # ``ANODES = [0, 1, ...]`` at the top of the file
            values = bound_values(f.module.tree.body, index.id)
    elif type(index) is ast.Attribute and type(index.value) is ast.Name and index.value.id == f.self_name \
            and f.cls is not None:
        values = []
        for name, node in f.cls.methods.items():
            method = facts_of(f.project, FuncRef(f.cls.module, node, f.cls, name))
            for store in method.self_stores:
                if store.attr == index.attr:
                    value = _stored_element(store)
                    if name == "__init__" and type(value) is ast.Name and value.id in method.params:
                        value = _passed_list(f.cls, node, value.id, f.project)
                    elif _returns_lists(f.cls, value) or _list_field(method, value):
                        # ``self.boundary = self._boundary_nodes(solid)``, ``self.montage = cfg.montage``
                        value = ast.List(elts=[], ctx=ast.Load())
                    values.append(value)
    else:
        return False
    return bool(values) and all(v is not None and _is_list(v) for v in values)


def _list_field(facts, value) -> bool:
    """``cfg.montage`` where ``cfg`` is an object of one of the project's classes whose body declares
    ``montage`` a list: ``montage: list = field(default_factory=lambda: [0, 1, 2])``, ``List[int]``, ``= [...]``."""
    if type(value) is not ast.Attribute:
        return False
    owner = facts.infer(value.value)
    if type(owner) is not tuple or owner[0] != "inst":
        return False
    for method in owner[1].methods.values():  # ``self.channels = torch.tensor(self.channels, device=...)``
        for node in ast.walk(method):
            if type(node) is ast.Assign and not _is_list(node.value) and any(
                    type(t) is ast.Attribute and t.attr == value.attr for t in node.targets):
                return False
    for stmt in owner[1].node.body:
        if type(stmt) is ast.AnnAssign and type(stmt.target) is ast.Name and stmt.target.id == value.attr:
            annotation = stmt.annotation.value if type(stmt.annotation) is ast.Subscript else stmt.annotation
            default = stmt.value
            factory = next((kw.value for kw in default.keywords if kw.arg == "default_factory"), None) \
                if type(default) is ast.Call else None
            return (type(annotation) is ast.Name and annotation.id in ("list", "List")) or _is_list(default) or (
                type(factory) is ast.Lambda and _is_list(factory.body)) or (type(factory) is ast.Name and factory.id == "list")
    return False


def _stored_element(store):
    """The value a store gives its attribute: the matching element of ``self.a, self.b = x, list(y)``."""
    value, stmt = store.value, store.stmt
    targets = getattr(stmt, "targets", None)
    if type(value) is ast.Tuple and targets and type(targets[0]) is ast.Tuple and len(targets[0].elts) == len(value.elts):
        for target, element in zip(targets[0].elts, value.elts, strict=True):
            if type(target) is ast.Attribute and target.attr == store.attr:
                return element
    return value


def _returns_lists(cls, value) -> bool:
    """``self.<method>(...)`` of the class whose every return is a list (``return ....tolist()``)."""
    if type(value) is not ast.Call or type(value.func) is not ast.Attribute or type(value.func.value) is not ast.Name:
        return False
    node = cls.methods.get(value.func.attr)
    returns = [r.value for r in ast.walk(node) if type(r) is ast.Return] if node is not None else []
    return bool(returns) and all(r is not None and (_is_list(r) or (type(r) is ast.Call and type(r.func) is ast.Attribute
                                                                  and r.func.attr == "tolist")) for r in returns)


def _passed_list(cls, init, param: str, project):
    """A list literal every construction of ``cls`` in view passes for ``param`` (or its default), or None."""
    ref = FuncRef(cls.module, init, cls, "__init__")
    passed = [argument_for(call, ref.positional_params, param) for _caller, call in call_sites(project, cls.name, None)]
    args = init.args
    positional = [*args.posonlyargs, *args.args]
    defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults):]], args.defaults, strict=True))
    passed = [p for p in passed if p is not None] or ([defaults[param]] if param in defaults else [])
    return passed[0] if passed and all(_is_list(p) for p in passed) else None


_PIN_FACTORIES = ("torch.empty", "torch.zeros", "torch.ones", "torch.full", "torch.tensor", "torch.empty_like", "torch.zeros_like")


@RULES.rule(
    Rule(
        code="CG304",
        name="pinned-alloc-in-region",
        category="pinned-memory",
        message="`{what}` allocates and fills pinned host memory during capture; replays reuse the captured buffer",
        compile_message="`{what}` allocates pinned host memory inside the compiled region",
        fix="Allocate the pinned buffer once, before capture; fill it on the host and `copy_()` it to a static GPU tensor before each replay.",
        what="Checks for `.pin_memory()` and `pin_memory=True` allocations inside a captured region.",
        why="Pinning is host work: it runs once, at capture. In torch 2.11 and 2.13 a pinned allocation "
        "made while a stream captures goes to a host pool private to that graph (`HostPrivatePool` in "
        "`ATen/core/CachingHostAllocator.h`), so the capture succeeds and no other code is handed the "
        "block while the graph can replay. Each replay then copies whatever the block holds at that "
        "moment: the values written at capture, unless code kept a reference and refills it, so new "
        "host data never reaches the graph through a buffer made in the region. Measured on one H200, "
        "torch 2.11 (benchmarks/RESULTS.md): a block filled with 2.0 in the capture and copied to the "
        "GPU times 3 replayed 6.0, and 15.0 after the kept tensor was refilled with 5.0.",
        example=code("""
            import torch

            host = torch.ones(64)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = host.pin_memory().to("cuda", non_blocking=True) * 2
            host.fill_(3.0)
            g.replay()
        """),
        use_instead=code("""
            import torch

            host = torch.ones(64).pin_memory()  # pinned once, before capture
            dev = torch.empty(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = dev * 2
            host.fill_(3.0)
            dev.copy_(host, non_blocking=True)
            g.replay()
        """),
        gpu_check="torch.cuda.synchronize()\nok = torch.equal(y, host.cuda() * 2)",
    ),
    Calls(quals=_PIN_FACTORIES, methods=("pin_memory",)),
)
def pinned_alloc_in_region(c, f):
    if c.qual is not None:
        if is_true(c.kwarg("pin_memory")):
            yield found(c.node, c.stmt, what=f"{c.qual}(..., pin_memory=True)")
    elif type(c.recv) is not tuple:
        yield found(c.node, c.stmt, what=".pin_memory()")


@RULES.rule(
    Rule(
        code="CG305",
        name="empty-cache-in-region",
        category="host-code",
        message="`torch.cuda.empty_cache()` is allocator work on the host; it does nothing on replay",
        fix="Call `torch.cuda.empty_cache()` outside the region, if at all.",
        manual="warning",
        compile="warning",
        what="Checks for `torch.cuda.empty_cache()` inside a captured region.",
        why="Releasing cached blocks is a host-side allocator call. It cannot be recorded in a graph, "
        "so inside a region it runs once at capture and never again, and it only makes capture slower.",
        example=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x * 2
                torch.cuda.empty_cache()
        """),
        use_instead=code("""
            import torch

            x = torch.randn(64, device="cuda")
            torch.cuda.empty_cache()  # before capture, if needed
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x * 2
            g.replay()
        """),
        gpu_skip="host-side allocator call: nothing fails and nothing on the GPU differs on replay",
    ),
    Calls(quals=("torch.cuda.empty_cache",)),
)
def empty_cache_in_region(c, f):
    yield found(c.node, c.stmt)
