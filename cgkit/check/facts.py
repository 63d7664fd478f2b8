"""What one function does, from one walk over its body.

A :class:`Facts` is computed once per function that a region reaches (and cached on the project):
the kind of each local name (tensor, mask, CPU tensor, stream, optimizer, module instance...), the
calls it makes, its conditions, subscripts, stores and loads. Rules read these lists; they never
walk the tree themselves.

Evidence is deliberately conservative: a parameter is not assumed to be a tensor; a value is a
tensor when it comes from a torch call, a tensor method, a module call, or a ``Tensor`` annotation.
"""

from __future__ import annotations

import ast
from typing import NamedTuple

from cgkit.check.names import add_import, dotted
from cgkit.check.project import FUNC_TYPES, ClassIndex, FuncRef, ModuleIndex, Project

# Kinds of tensors. Objects are tuples: ("inst", ClassIndex), ("nn", qual), ("optim", qual, call),
# ("stream",), ("event",), ("graph",), ("generator",), ("scaler",), ("logger",), ("compiled", call),
# ("ddp", call), ("file",), ("device", is_cuda), ("scheduler", qual, call), ("device_module",),
# ("modules", qual, classes) for nn.Sequential / nn.ModuleList of project classes.
TENSOR = "T"
MASK = "M"
CPU = "C"
TENSOR_KINDS = (TENSOR, MASK, CPU)

_TORCH_NON_TENSOR = frozenset(
    """is_tensor is_storage is_floating_point is_complex is_nonzero numel get_default_dtype
    set_default_dtype set_default_device get_default_device manual_seed seed initial_seed
    get_rng_state set_rng_state device dtype compile no_grad enable_grad inference_mode
    set_grad_enabled is_grad_enabled autocast save load equal allclose use_deterministic_algorithms
    are_deterministic_algorithms_enabled typename set_printoptions finfo iinfo cond vmap
    is_inference_mode_enabled set_num_threads get_num_threads broadcast_shapes result_type
    promote_types can_cast is_autocast_enabled set_float32_matmul_precision
    get_float32_matmul_precision set_anomaly_enabled is_anomaly_enabled empty_cache
    get_device_module is_warn_always_enabled""".split()
)
_TORCH_TENSOR_SUBMODULES = ("nn.functional", "linalg", "fft", "special", "nested", "masked")
_CPU_FACTORIES = frozenset(
    """tensor as_tensor zeros ones empty full arange range linspace logspace eye rand randn randint
    randperm normal bernoulli multinomial poisson empty_strided from_numpy frombuffer asarray""".split()
)
RANDOM_FACTORIES = frozenset("rand randn randint randperm normal bernoulli multinomial poisson".split())
# Random ops that draw from a tensor argument: the result is on that tensor's device (``normal(mean, std)``
# takes tensors too, but ``normal(0.0, 1.0, size)`` does not).
_FROM_INPUT = frozenset("multinomial bernoulli poisson".split())
_NON_TENSOR_METHODS = frozenset(
    """item tolist numpy size dim ndimension numel nelement element_size data_ptr stride
    storage_offset is_contiguous is_floating_point is_complex get_device equal allclose
    untyped_storage storage backward register_hook retain_grad is_set_to is_pinned is_shared
    has_names dim_order record_stream is_nonzero qscheme __len__ __bool__ __float__ __int__
    synchronize query keys values items append extend""".split()
)
_MASK_FUNCS = frozenset(
    """bool isnan isinf isfinite eq ne gt ge lt le logical_and logical_or logical_not logical_xor
    isclose isneginf isposinf signbit isin""".split()
)
_TENSOR_ATTRS = frozenset("T mT H mH data grad real imag values indices".split())  # values/indices: of max/topk/sort
_MODULE_KEEP_METHODS = frozenset(
    "cuda to half float double bfloat16 train eval requires_grad_ to_empty cpu type share_memory".split()
)
_OBJECT_CALLS = {
    "torch.cuda.Stream": ("stream",),
    "torch.cuda.current_stream": ("stream",),
    "torch.cuda.default_stream": ("stream",),
    "torch.cuda.ExternalStream": ("stream",),
    "torch.Stream": ("stream",),
    "torch.accelerator.current_stream": ("stream",),
    "torch.cuda.Event": ("event",),
    "torch.Event": ("event",),
    "torch.cuda.CUDAGraph": ("graph",),
    "torch.Generator": ("generator",),
    "torch.amp.GradScaler": ("scaler",),
    "logging.getLogger": ("logger",),
    "builtins.open": ("file",),
}
_STREAM_TYPE_NAMES = ("torch.cuda.Stream", "torch.Stream")


def is_tensor(kind) -> bool:
    return kind is TENSOR or kind is MASK or kind is CPU


def is_callable_module(kind, project: Project) -> bool:
    if type(kind) is not tuple:
        return False
    tag = kind[0]
    if tag == "inst":
        return kind[1].is_module(project)
    if tag in ("nn", "modules"):  # a container of modules (``nn.ModuleList``) is not called itself
        return not kind[1].endswith(("ModuleList", "ModuleDict", "ParameterList", "ParameterDict"))
    return tag in ("ddp", "compiled")


def merge_argument_kinds(found: dict, kinds: dict) -> None:
    """Add one call site's argument kinds to ``found``: the first kind given wins, but a GPU tensor
    outweighs a CPU one (where it is on the GPU, the graph is recorded)."""
    for param, kind in (kinds or {}).items():
        if param not in found or (found[param] is CPU and is_tensor(kind) and kind is not CPU):
            found[param] = kind


def element_kind(kind):
    """What indexing or iterating a container of modules gives: its one class (several: unknown)."""
    if type(kind) is tuple:
        if kind[0] == "modules" and len(kind[2]) == 1:
            return ("inst", kind[2][0])
        if kind[0] == "inst":  # a list of instances of one class is kept as that class
            return kind
    return None


class CallSite:
    """One call: the node, the qualified name of what is called, and for ``x.m(...)`` the method."""

    __slots__ = ("node", "qual", "meth", "recv", "stmt", "loop")

    def __init__(self, node, qual, meth, recv, stmt, loop):
        self.node = node
        self.qual = qual  # canonical qualified name, or None
        self.meth = meth  # attribute name for method calls, else None
        self.recv = recv  # kind of the receiver for method calls
        self.stmt = stmt  # enclosing statement
        self.loop = loop  # loop depth at the call

    def kwarg(self, name: str):
        for kw in self.node.keywords:
            if kw.arg == name:
                return kw.value
        return None

    def arg(self, index: int, name: str | None = None):
        if name is not None:
            value = self.kwarg(name)
            if value is not None:
                return value
        args = self.node.args
        if index < len(args) and not any(type(a) is ast.Starred for a in args[: index + 1]):
            return args[index]
        return None


class SelfStore(NamedTuple):
    """``self.<attr> = value`` (value None for augmented assignments), with the value's kind there."""

    attr: str
    stmt: ast.AST
    value: ast.expr | None
    kind: object


class Store:
    __slots__ = ("name", "node", "kind", "loop", "aug", "loop_target")

    def __init__(self, name, node, kind, loop, aug=False, loop_target=False):
        self.name = name
        self.node = node
        self.kind = kind
        self.loop = loop
        self.aug = aug
        self.loop_target = loop_target


_LOOP_EXIT = object()


class Facts:
    def __init__(self, fref: FuncRef, project: Project):
        self.fref = fref
        self.module: ModuleIndex = fref.module
        self.project = project
        self.cls: ClassIndex | None = fref.cls
        self._enclosing: tuple | None = None  # (function node, class) this one is nested in, once looked up
        self.kinds: dict[str, object] = {}
        self.local_imports: dict[str, str] | None = None
        self.local_defs: dict[str, ast.AST] = {}
        self.params: list[str] = []
        self.param_nodes: dict[str, ast.arg] = {}
        self.self_name: str | None = None
        self.calls: list[CallSite] = []
        self.conds: list[tuple[ast.expr, ast.AST]] = []  # (tested expression, statement)
        self.indexings: list[tuple[ast.Subscript, ast.AST]] = []  # reads and writes: ``x[i]``, ``x[i] = v``
        self.fstrings: list[tuple[ast.FormattedValue, ast.AST]] = []
        self.withs: list[ast.With] = []
        self.stores: list[Store] = []
        self.loads: list[ast.Name] = []
        self.self_loads: list[ast.Attribute] = []
        self.attr_loads: list[ast.Attribute] = []  # ``obj.attr`` read on another name
        self.self_stores: list[SelfStore] = []
        self.attr_stores: list[tuple[ast.Name, str, ast.AST]] = []  # ``obj.attr = ...`` on another object
        # ``self.model.temperature = ...``, ``live.running.weather_factor = ...``: a part of an object
        self.held_stores: list[tuple[ast.Attribute, str, ast.AST]] = []
        self.item_stores: list[tuple[ast.Subscript, ast.AST]] = []  # ``x[key] = ...``
        self.escapes: list[tuple[str, ast.AST]] = []  # names put into a container/attribute/yield
        self.dels: list[tuple[str, ast.AST]] = []
        self.global_names: set[str] = set()
        self.stream_withs: list[tuple[ast.With, ast.expr]] = []
        self.loops: list[ast.stmt] = []
        # Every binding of a local name, in source order: (position where it takes effect, kind).
        # Names are read with the kind of the last binding before the read, so ``x = x.item()``
        # and a name reused for a number after a tensor are told apart.
        self.timeline: dict[str, list[tuple[tuple[int, int], object]]] = {}
        self.entry_kinds: dict[str, object] = {}  # parameters' kinds on entry (annotations, call sites)
        self.scalar_params: set[str] = set()  # parameters that evidence says are not tensors
        self._hazards = None
        self.scanned = False  # set when the walk over the body is complete
        self._stmt = fref.node
        self._loop = 0

    def scan(self) -> None:
        self._scan()
        self.scanned = True

    # -- names ---------------------------------------------------------------------------------
    def qual(self, node) -> str | None:
        parts = dotted(node)
        if parts is None:
            return None
        head = parts[0]
        if head in self.kinds or head in self.params or head in self.local_defs:
            if not (self.local_imports and head in self.local_imports):
                return None
        q = self.module.qual(node, self.local_imports)
        if q is None and len(parts) == 1 and head in _BUILTINS:
            return "builtins." + head
        return q

    def loops_binding(self, name: str) -> list[tuple[ast.expr, ast.expr]]:
        """``(iter, target)`` of each ``for`` loop (or comprehension) that binds ``name``: ``(zip(bs, gs),
        (b, g))`` for ``for b, g in zip(bs, gs)``."""
        return [(s.node.iter, s.node.target) for s in self.stores
                if s.name == name and s.loop_target and getattr(s.node, "iter", None) is not None]

    def kind_of_name(self, name: str, at: tuple[int, int] | None = None):
        """The kind of a local name: as last bound before position ``at`` (line, column), or as
        bound at the end of the function when ``at`` is None."""
        if at is not None:
            steps = self.timeline.get(name)
            if steps is not None:
                kind, bound = None, False
                for position, step_kind in steps:
                    if position < at:
                        kind, bound = step_kind, True
                if bound:
                    return kind
                if name in self.params:
                    return self.entry_kinds.get(name)
                return self._outer_kind(name)
        kind = self.kinds.get(name)
        if kind is not None or name in self.params:
            return kind
        return self._outer_kind(name)

    def _outer_kind(self, name: str):
        if type(self.fref.node) is not ast.Module:
            enclosing = self._enclosing_facts()
            if enclosing is not None and name in enclosing.kinds:  # a closure: ``opt`` of the function around ``def step()``
                return enclosing.kinds[name]
            mod_facts = module_facts(self.project, self.module)
            if mod_facts is not None:
                return mod_facts.kinds.get(name)
        return None

    def _enclosing_facts(self):
        """The facts of the function this one is nested in (its closure's names), once that is walked."""
        if self._enclosing is None:
            self._enclosing = self._find_enclosing()
        parent, parent_cls = self._enclosing
        if parent is None:
            return None
        cached = self.project.facts_cache.get(id(parent))
        if cached is not None and not cached.scanned:
            return None  # being walked now
        return facts_of(self.project, FuncRef(self.module, parent, parent_cls, parent.name))

    def _find_enclosing(self) -> tuple:
        node = self.fref.node
        parent, parent_cls = None, None
        outers = [(d, None) for d in self.module.defs.values()]
        outers += [(m, c) for c in self.module.classes.values() for m in c.methods.values()]
        for outer, cls in outers:
            if outer is not node and outer.lineno < node.lineno <= outer.end_lineno:
                for inner in ast.walk(outer):
                    if type(inner) in FUNC_TYPES and inner is not node and inner.lineno < node.lineno <= inner.end_lineno \
                            and (parent is None or inner.lineno > parent.lineno):
                        parent, parent_cls = inner, cls if inner is outer else None
        return parent, parent_cls

    # -- inference -----------------------------------------------------------------------------
    def infer(self, e, _depth: int = 0):
        if _depth > 30:
            return None
        t = type(e)
        if t is ast.Name:
            return self.kind_of_name(e.id, (e.lineno, e.col_offset))
        if t is ast.Call:
            return self._infer_call(e, _depth)
        if t is ast.BinOp:
            left = self.infer(e.left, _depth + 1)
            right = self.infer(e.right, _depth + 1)
            if is_tensor(left) or is_tensor(right):
                if type(e.op) in (ast.BitAnd, ast.BitOr, ast.BitXor) and (left is MASK or right is MASK):
                    return MASK
                if left is CPU and (right is CPU or not is_tensor(right)):
                    return CPU
                return TENSOR
            return None
        if t is ast.UnaryOp:
            if type(e.op) is ast.Not:
                return None
            inner = self.infer(e.operand, _depth + 1)
            if is_tensor(inner):
                return MASK if type(e.op) is ast.Invert and inner is MASK else TENSOR
            return None
        if t is ast.Compare:
            if any(type(side) is ast.Constant and isinstance(side.value, (str, bytes)) for side in (e.left, *e.comparators)):
                return None  # ``fmt == "sbhd"``: a string is never a tensor
            kinds = [self.infer(side, _depth + 1) for side in (e.left, *e.comparators)]
            if any(is_tensor(k) for k in kinds):
                if any(type(op) in (ast.Is, ast.IsNot, ast.In, ast.NotIn) for op in e.ops):
                    return None
                # a comparison of CPU tensors is a CPU mask (moving it to the GPU is a host copy)
                return CPU if all(k is CPU or not is_tensor(k) for k in kinds) else MASK
            return None
        if t is ast.Subscript:
            inner = self.infer(e.value, _depth + 1)
            if is_tensor(inner):
                return CPU if inner is CPU else TENSOR
            return element_kind(inner)
        if t in (ast.ListComp, ast.GeneratorExp):  # ``[Block() for _ in range(n)]``: a list of one class
            element = self.infer(e.elt, _depth + 1)
            return element if type(element) is tuple and element[0] == "inst" else None
        if t is ast.Attribute:
            value = e.value
            if type(value) is ast.Name and value.id == self.self_name and self.cls is not None:
                return attr_kind(self.cls, e.attr, self.project)
            inner = self.infer(value, _depth + 1)
            if e.attr in _TENSOR_ATTRS and is_tensor(inner):
                return TENSOR
            if type(inner) is tuple and inner[0] == "nn" and e.attr in ("weight", "bias"):
                return TENSOR  # ``self.emb.weight`` of a torch.nn layer: a parameter
            if type(inner) is tuple and inner[0] == "inst":
                return attr_kind(inner[1], e.attr, self.project)  # ``self.net.threat`` of the file's own class
            return None
        if t is ast.IfExp:
            body, orelse = self.infer(e.body, _depth + 1), self.infer(e.orelse, _depth + 1)
            if type(body) is tuple and type(orelse) is tuple and body[0] == orelse[0] == "inst":
                # ``SoftGate() if robust else Gate()``: the base class, or one of its subclasses (whose
                # overrides a method call then reaches too)
                for base, other in ((orelse, body), (body, orelse)):
                    if base[1] in other[1].mro(self.project):
                        return ("inst", base[1], "or a subclass")
            return body or orelse
        if t is ast.NamedExpr:
            return self.infer(e.value, _depth + 1)
        return None

    def stored_on(self, owner: str, attr: str, line: int):
        """The value this function last put in ``owner.attr`` (``st.net = Net()``) above ``line``, or None."""
        for name, stored_attr, stmt in reversed(self.attr_stores):
            if stored_attr == attr and name.id == owner and stmt.lineno < line and type(stmt) is ast.Assign \
                    and len(stmt.targets) == 1 and type(stmt.targets[0]) is ast.Attribute:
                return stmt.value
        return None

    def _infer_call(self, e: ast.Call, depth: int):
        func = e.func
        q = self.qual(func)
        if q is not None:
            kind = _OBJECT_CALLS.get(q)
            if kind is not None:
                return kind
            if q == "torch.compile":
                return ("compiled", e)
            if q.startswith("torch."):
                return self._infer_torch_call(q, e)
            target = self.project.lookup(q) if "." in q else None
            if target is None and q.startswith(self.module.modname + "."):
                name = q[len(self.module.modname) + 1 :]
                target = self.module.classes.get(name)
            if isinstance(target, ClassIndex):
                return ("inst", target)
            if isinstance(target, FuncRef):
                return _returns_kind(target.node, self.module, q, self.project)
            if type(func) is ast.Call:  # torch.compile(...)(fn)
                inner = self.qual(func.func)
                if inner == "torch.compile":
                    return ("compiled", func)
            return None
        if type(func) is ast.Attribute:
            meth = func.attr
            recv = self.infer(func.value, depth + 1)
            if is_tensor(recv):
                if meth in _NON_TENSOR_METHODS:
                    return None
                if meth == "cpu" or (meth == "to" and _is_cpu_device_call(e)):
                    return CPU
                if meth in ("cuda", "pin_memory") or (meth == "to" and e.args and _device_literal(e.args[0]) == "cuda"):
                    return TENSOR
                if meth in _MASK_FUNCS:
                    return MASK
                return CPU if recv is CPU and meth not in ("to", "cuda") else TENSOR
            if type(recv) is tuple:
                tag = recv[0]
                if tag in ("inst", "nn", "ddp", "compiled", "modules") and meth in _MODULE_KEEP_METHODS:
                    return recv
                if tag == "inst" and meth == "forward" and recv[1].is_module(self.project):
                    return TENSOR
                return None
            if recv is None and not is_self_attr(func.value, self.self_name):
                if meth in _TENSOR_ONLY_METHODS:
                    return TENSOR  # ``logits.softmax(-1)``: only tensors have these methods (not arrays, lists, modules)
                if meth in _TENSOR_ONLY_MASK_METHODS:
                    return MASK
                if meth in _ARRAY_REDUCTIONS and not e.keywords and len(e.args) <= 1 and not self._numpy_made(func.value):
                    # ``(p > 250.0).any()``, ``valid.sum()``: a reduction only arrays have (lists, numbers,
                    # strings and modules do not); one not made from NumPy is a tensor's
                    return TENSOR
            if recv is None and meth in _TO_DEVICE and type(func.value) in (ast.Subscript, ast.Attribute) \
                    and not is_self_attr(func.value, self.self_name):
                # ``batch["x"].cuda()``, ``item.feats.to(device)``: data moved to the GPU (a module is
                # moved through a name, and ``self.<sub>`` is resolved above when it is one).
                return TENSOR
            if recv is None and meth in ("cuda", "to") and any(kw.arg == "non_blocking" for kw in e.keywords):
                return TENSOR  # ``t.cuda(non_blocking=True)``: Module.cuda takes no non_blocking; data does
        elif type(func) is ast.Call:
            inner_q = self.qual(func.func)
            if inner_q == "torch.compile":
                return ("compiled", func)
        # Calling a module instance (``self.block(x)``, ``model(x)``) gives its output tensor.
        if is_callable_module(self.infer(func, depth + 1), self.project):
            return TENSOR
        return None

    def _numpy_made(self, expr) -> bool:
        """The value comes from NumPy: ``x.cpu().numpy() > 0.1``, ``np.abs(a)``, or a name bound to one."""
        if type(expr) is ast.Name:
            bound = [s for s in self.stores if s.name == expr.id and type(s.node) is ast.Assign]
            expr = bound[-1].node.value if bound else expr
        for node in ast.walk(expr):
            if type(node) is ast.Call:
                q = self.qual(node.func) or ""
                if q.startswith("numpy.") or (type(node.func) is ast.Attribute and node.func.attr == "numpy"):
                    return True
        return False

    def _infer_torch_call(self, q: str, e: ast.Call):
        parts = q.split(".")
        last = parts[-1]
        if q in ("torch.nn.Parameter", "torch.nn.Buffer", "torch.Tensor"):
            return TENSOR
        if len(parts) >= 3 and parts[1] == "optim" and last[:1].isupper():
            return ("scheduler", q, e) if "lr_scheduler" in parts else ("optim", q, e)
        if q in ("torch.nn.parallel.DistributedDataParallel", "torch.nn.DataParallel"):
            inner = self.infer(e.args[0]) if e.args else None
            return ("ddp", e, inner)
        if q in _MODULE_CONTAINERS:
            classes = self._element_classes(e)
            if classes:  # ``nn.Sequential(A(), B())``, ``nn.ModuleList([Block() for _ in range(n)])``
                return ("modules", q, classes)
        if len(parts) >= 3 and parts[1] == "nn" and last[:1].isupper():
            return ("nn", q)
        if q in _TENSOR_RETURNING:
            return TENSOR
        if parts[1] == "device":
            return ("device", bool(e.args) and _device_literal(e.args[0]) == "cuda")
        sub = ".".join(parts[1:-1])
        if len(parts) == 2 or sub in _TORCH_TENSOR_SUBMODULES:
            if last in _TORCH_NON_TENSOR or last.startswith(("is_", "get_", "set_", "_")) or last[:1].isupper():
                return None
            if last in _MASK_FUNCS:
                return MASK
            if last in _FROM_INPUT and e.args and type(e.args[0]) is not ast.Constant:
                # ``torch.multinomial(probs, n)``, ``torch.bernoulli(p)``: drawn where the input lives
                return TENSOR if self.infer(e.args[0]) is not CPU else CPU
            if last in _CPU_FACTORIES and len(parts) == 2:
                pinned = _kw(e, "pin_memory")
                if type(pinned) is ast.Constant and pinned.value is True:
                    return TENSOR  # pinned host memory: copies from it are asynchronous (like .pin_memory())
                device = _kw(e, "device")
                if last == "from_numpy" or device is None:
                    return CPU
                return CPU if _device_literal(device) == "cpu" else TENSOR
            if e.args and type(e.args[0]) is not ast.Constant and _kw(e, "device") is None \
                    and self.infer(e.args[0]) is CPU:
                return CPU  # ``torch.cumsum(lengths_cpu, 0)``: an op on a host tensor runs on the host
            return TENSOR
        return None

    def _element_classes(self, call: ast.Call) -> tuple:
        """The project classes of the modules put in an ``nn.Sequential``/``ModuleList``."""
        out = []
        for arg in call.args:
            value = arg.value if type(arg) is ast.Starred else arg
            items = value.elts if type(value) in (ast.List, ast.Tuple) else [value]
            if type(value) is ast.Name:  # ``stages.append(nn.Sequential(down, *blocks))`` ... ``ModuleList(stages)``
                items = items + [c.node.args[0] for c in self.calls if c.meth == "append" and len(c.node.args) == 1
                                 and type(c.node.func.value) is ast.Name and c.node.func.value.id == value.id]
            for item in items:
                kind = self.infer(item.elt if type(item) in (ast.ListComp, ast.GeneratorExp) else item)
                classes = (kind[1],) if type(kind) is tuple and kind[0] == "inst" else \
                    kind[2] if type(kind) is tuple and kind[0] == "modules" else ()  # a Sequential put in a list
                out += [c for c in classes if c not in out]
        return tuple(out)

    # -- the walk ------------------------------------------------------------------------------
    def _scan(self) -> None:
        node = self.fref.node
        if type(node) is ast.Module:
            body = node.body
        else:
            self._params(node)
            body = node.body
        stack: list = list(reversed(body))
        pop = stack.pop
        push = stack.extend
        handlers = _HANDLERS
        while stack:
            n = pop()
            if n is _LOOP_EXIT:
                self._loop -= 1
                continue
            t = type(n)
            if t in FUNC_TYPES:
                self.local_defs[n.name] = n
                continue
            if t is ast.ClassDef or t is ast.Lambda:
                continue
            if isinstance(n, ast.stmt):
                self._stmt = n
            h = handlers.get(t)
            if h is not None:
                h(self, n)
            if t is ast.For or t is ast.While or t is ast.AsyncFor:
                # The iterable is evaluated once, before the loop; target, test and body per iteration.
                stack.append(_LOOP_EXIT)
                push(reversed([*n.body, *n.orelse]))
                if t is ast.While:
                    stack.append(n.test)
                stack.append(_Enter(n))
                if t is not ast.While:
                    stack.append(n.iter)
                continue
            if t is _Enter:
                self._loop += 1
                loop = n.node
                self.loops.append(loop)
                if type(loop) is not ast.While:
                    self._stmt = loop
                    target = loop.target
                    iter_kind = self.infer(loop.iter)
                    element = element_kind(iter_kind)
                    if element is not None and type(target) is ast.Name:  # ``for block in self.blocks:``
                        iter_kind = element
                    zipped = self._zipped_elements(loop.iter, target)
                    if zipped:  # ``for attn, norm in zip(self.attn, self.norms):``
                        for name, kind in zipped:
                            self._store_target(name, kind, loop, loop_target=True, at=(name.lineno, name.col_offset))
                    else:
                        self._store_target(target, iter_kind, loop, loop_target=True,
                                           at=(target.lineno, target.col_offset))
                continue
            push(reversed(list(ast.iter_child_nodes(n))))

    def _zipped_elements(self, it, target) -> list:
        """(name, kind) for each name of ``for a, b in zip(xs, ys)`` or ``for i, x in enumerate(xs)``
        whose iterable holds modules of one class (their element kind); [] for other loops."""
        if type(it) is not ast.Call or type(target) is not ast.Tuple or it.keywords:
            return []
        names = target.elts
        if not all(type(n) is ast.Name for n in names) or any(type(a) is ast.Starred for a in it.args):
            return []
        q = self.qual(it.func)
        if q == "builtins.zip" and len(it.args) == len(names):
            sources = list(it.args)
        elif q == "builtins.enumerate" and len(it.args) == 1 and len(names) == 2:
            sources = [None, it.args[0]]
        else:
            return []
        kinds = [element_kind(self.infer(source)) if source is not None else None for source in sources]
        return list(zip(names, kinds, strict=True)) if any(k is not None for k in kinds) else []

    def _params(self, fn) -> None:
        args = fn.args
        allargs = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        if args.vararg:
            allargs.append(args.vararg)
        if args.kwarg:
            allargs.append(args.kwarg)
        defaults = _param_defaults(args)
        for a in allargs:
            self.params.append(a.arg)
            self.param_nodes[a.arg] = a
            if a.annotation is not None and _is_tensor_annotation(a.annotation):
                self.kinds[a.arg] = TENSOR
            elif _is_scalar_annotation(a.annotation) or _is_scalar_default(defaults.get(a.arg)):
                self.scalar_params.add(a.arg)
            elif a.annotation is not None:
                cls = self._annotated_class(a.annotation)
                if cls is not None:  # ``model: Transformer``: calling it runs Transformer.forward
                    self.kinds[a.arg] = ("inst", cls)
                else:
                    q = self.module.qual(a.annotation)  # ``backbone: nn.Module``: a module of torch's
                    if q is not None and q.startswith("torch.nn.") and q.rsplit(".", 1)[-1][:1].isupper():
                        self.kinds[a.arg] = ("nn", q)
        seeds = self.project.param_seeds.get(id(fn))
        if seeds:
            for name, kind in seeds.items():
                if name not in self.scalar_params:
                    self.kinds.setdefault(name, kind)
        first = [*args.posonlyargs, *args.args]
        if id(fn) in self.project.closure_self:  # a function defined in a method, reading its ``self``
            self.self_name = self.project.closure_self[id(fn)]
        elif self.cls is not None and first and not any(_decorator_name(d) == "staticmethod" for d in fn.decorator_list):
            self.self_name = first[0].arg
            self.params.remove(first[0].arg)
        candidates = set(self.params) - set(self.kinds) - self.scalar_params - {self.self_name}
        for name in _used_as_tensor(fn, candidates, lambda node: self.module.qual(node, self.local_imports)):
            self.kinds[name] = TENSOR  # ``lengths[:, None].clamp(min=1)`` somewhere in the body
        self.entry_kinds = dict(self.kinds)

    def _annotated_class(self, annotation) -> ClassIndex | None:
        """The project class an annotation names: ``Transformer``, ``"Transformer"``,
        ``Optional[Transformer]``, ``Transformer | None``, ``models.Transformer``."""
        node = annotation
        if type(node) is ast.Constant and isinstance(node.value, str):
            try:
                node = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                return None
        if type(node) is ast.BinOp and type(node.op) is ast.BitOr:
            left, right = node.left, node.right
            if type(right) is ast.Constant and right.value is None:
                node = left
            elif type(left) is ast.Constant and left.value is None:
                node = right
            else:
                return None
        if type(node) is ast.Subscript:
            parts = dotted(node.value)
            if not parts or parts[-1] != "Optional":
                return None
            node = node.slice
        if dotted(node) is None:
            return None
        target = self.module.resolve_expr(node, self.project, self.local_imports)
        return target if isinstance(target, ClassIndex) else None

    def _store_target(self, target, kind, stmt, aug=False, loop_target=False, at=None, value=None) -> None:
        """Bind ``target`` to ``kind``; the binding takes effect at position ``at`` (default: the end
        of ``stmt``, after its value is computed). ``value``: the element of the statement's value that
        ``target`` receives, where it unpacks a tuple written out."""
        t = type(target)
        if t is ast.Name:
            if not aug:
                if kind is None:
                    self.kinds.pop(target.id, None)
                else:
                    self.kinds[target.id] = kind
                if at is None:
                    at = (stmt.end_lineno, stmt.end_col_offset)
                self.timeline.setdefault(target.id, []).append((at, kind))
            self.stores.append(Store(target.id, stmt, kind, self._loop, aug, loop_target))
        elif t is ast.Tuple or t is ast.List:
            element_kind = kind if (is_tensor(kind) and not loop_target) else None
            for elt in target.elts:
                self._store_target(elt, element_kind, stmt, aug, loop_target, at)
        elif t is ast.Starred:
            self._store_target(target.value, None, stmt, aug, loop_target, at)
        elif t is ast.Attribute:
            owner = target.value
            if type(owner) is ast.Name and owner.id == self.self_name:
                if aug:
                    value = None
                elif value is None:
                    value = getattr(stmt, "value", None)
                self.self_stores.append(SelfStore(target.attr, stmt, value, None if aug else kind))
            elif type(owner) is ast.Name:
                self.attr_stores.append((owner, target.attr, stmt))
            elif type(owner) is ast.Attribute and (held_by_self(owner, self) or _name_root(owner) is not None):
                self.held_stores.append((owner, target.attr, stmt))
        elif t is ast.Subscript:
            self.item_stores.append((target, stmt))

    @property
    def subscripts(self) -> list[tuple[ast.Subscript, ast.AST]]:
        """The reads among the indexings: ``x[i]``, not ``x[i] = v``."""
        return [item for item in self.indexings if type(item[0].ctx) is ast.Load]

    # -- hazards -------------------------------------------------------------------------------
    def hazards(self, scan) -> list:
        """What `scan` (the rules' function_hazards) finds in this function, computed once."""
        if self._hazards is None:
            self._hazards = scan(self)
        return self._hazards


class _Enter:
    __slots__ = ("node",)

    def __init__(self, node):
        self.node = node


def _h_assign(f: Facts, n) -> None:
    value = n.value
    if type(value) in (ast.Tuple, ast.List) and any(type(t) in (ast.Tuple, ast.List) for t in n.targets):
        kinds = [f.infer(elt) for elt in value.elts]
        for target in n.targets:
            if type(target) in (ast.Tuple, ast.List) and len(target.elts) == len(kinds):
                for elt, kind, part in zip(target.elts, kinds, value.elts, strict=True):
                    f._store_target(elt, kind, n, value=part)  # ``self.task, self.seen = 0, 0``: each its number
            else:
                f._store_target(target, None, n)
        return
    if type(value) in (ast.GeneratorExp, ast.ListComp) and any(type(t) in (ast.Tuple, ast.List) for t in n.targets):
        # ``obs, act, rew = (t.cuda() for t in batch)``: each name gets the element's kind.
        element = f.infer(value.elt)
        for target in n.targets:
            if type(target) in (ast.Tuple, ast.List):
                for elt in target.elts:
                    f._store_target(elt, element if is_tensor(element) else None, n)
            else:
                f._store_target(target, None, n)
        return
    kind = f.infer(value)
    annotation = getattr(n, "annotation", None)  # ``x: Tensor = f()``, read as an assignment
    if annotation is not None and not is_tensor(kind) and _is_tensor_annotation(annotation):
        kind = TENSOR
    for target in n.targets:
        f._store_target(target, kind, n)
        if type(target) is ast.Subscript and type(n.value) is ast.Name:
            f.escapes.append((n.value.id, n))
        elif type(target) is ast.Attribute and type(n.value) is ast.Name:
            f.escapes.append((n.value.id, n))


def _h_annassign(f: Facts, n) -> None:
    # (annotated assignments with a value in code are read as assignments when the file is parsed: engine.py)
    kind = TENSOR if _is_tensor_annotation(n.annotation) else (f.infer(n.value) if n.value is not None else None)
    if n.value is not None or kind is not None:
        f._store_target(n.target, kind, n)


def _h_augassign(f: Facts, n) -> None:
    f._store_target(n.target, None, n, aug=True)


def _h_if(f: Facts, n) -> None:
    f.conds.append((n.test, n))


def _h_assert(f: Facts, n) -> None:
    f.conds.append((n.test, n))


def _h_ifexp(f: Facts, n) -> None:
    f.conds.append((n.test, f._stmt))


def _h_boolop(f: Facts, n) -> None:
    for value in n.values:
        f.conds.append((value, f._stmt))


def _h_unary(f: Facts, n) -> None:
    if type(n.op) is ast.Not:
        f.conds.append((n.operand, f._stmt))


def _h_call(f: Facts, n: ast.Call) -> None:
    func = n.func
    meth = recv = None
    if type(func) is ast.Attribute:
        meth = func.attr
        q = f.qual(func)
        if q is None:
            recv = f.infer(func.value)
        if meth == "append" and len(n.args) == 1:
            kept = _viewed_name(n.args[0])  # ``out.append(y)``, or a view of it: ``out.append(y[:, :8])``
            if kept is not None:
                f.escapes.append((kept, f._stmt))
    else:
        q = f.qual(func)
    f.calls.append(CallSite(n, q, meth, recv, f._stmt, f._loop))


def _name_root(node) -> str | None:
    """``live`` for ``live.running``: the name an attribute chain starts from."""
    while type(node) is ast.Attribute:
        node = node.value
    return node.id if type(node) is ast.Name else None


def held_by_self(node, facts) -> bool:
    """``self.attn``, ``self.model.attn``, ``self.buffers["x"]``, or ``cb`` in ``for cb in self.callbacks``
    (or ``enumerate(self.layers)``): a part the object holds, not a local of unknown type."""
    while type(node) in (ast.Attribute, ast.Subscript):
        node = node.value
    if type(node) is not ast.Name or facts.self_name is None:
        return False
    if node.id == facts.self_name:
        return True
    loops = [s for s in facts.stores if s.name == node.id and s.loop_target]
    return bool(loops) and all(held_by_self(_iterated(getattr(s.node, "iter", None)), facts) for s in loops)


def _iterated(node):
    """``self.layers`` for ``enumerate(self.layers)`` or ``reversed(self.layers)``."""
    if type(node) is ast.Call and type(node.func) is ast.Name and node.func.id in ("enumerate", "reversed") and node.args:
        return node.args[0]
    return node


# Tensor methods whose result shares the tensor's memory (a view): keeping the result keeps the tensor.
_VIEW_METHODS = frozenset(
    "detach view view_as squeeze unsqueeze transpose t permute narrow expand expand_as select unflatten".split())


def _viewed_name(node) -> str | None:
    """The name whose memory ``node`` shares: ``y`` for ``y``, ``y[:, :8]``, ``y["logits"][0]`` or
    ``y.detach()``."""
    while True:
        if type(node) is ast.Subscript:
            node = node.value
        elif type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr in _VIEW_METHODS:
            node = node.func.value
        else:
            break
    return node.id if type(node) is ast.Name else None


def _h_subscript(f: Facts, n) -> None:
    if type(n.ctx) is not ast.Del:
        f.indexings.append((n, f._stmt))


def _h_fstring(f: Facts, n) -> None:
    f.fstrings.append((n, f._stmt))


def _h_with(f: Facts, n) -> None:
    f.withs.append(n)
    for item in n.items:
        expr = item.context_expr
        # ``with (torch.cuda.stream(s) if overlap else contextlib.nullcontext()):``: either branch may run
        for option in (expr.body, expr.orelse) if type(expr) is ast.IfExp else (expr,):
            if type(option) is ast.Call and f.qual(option.func) in ("torch.cuda.stream", "torch.cuda.StreamContext"):
                if option.args:
                    f.stream_withs.append((n, option.args[0]))
        if item.optional_vars is not None:
            f._store_target(item.optional_vars, f.infer(expr), n, at=(expr.end_lineno, expr.end_col_offset))


def _h_name(f: Facts, n) -> None:
    if type(n.ctx) is ast.Load:
        f.loads.append(n)


def _h_attribute(f: Facts, n) -> None:
    if type(n.ctx) is not ast.Load:
        return
    value = n.value
    if type(value) is ast.Name:
        if value.id == f.self_name:
            f.self_loads.append(n)
        else:
            f.attr_loads.append(n)
    elif type(value) is ast.Attribute and type(value.value) is ast.Name and value.value.id == f.self_name \
            and f.self_name is not None:
        f.attr_loads.append(n)  # ``self.cfg.gain``: a setting of an object the instance holds


def _h_delete(f: Facts, n) -> None:
    for target in n.targets:
        if type(target) is ast.Name:
            f.dels.append((target.id, n))


def _h_global(f: Facts, n) -> None:
    f.global_names.update(n.names)


def _h_import(f: Facts, n) -> None:
    if type(f.fref.node) is ast.Module:
        return
    if f.local_imports is None:
        f.local_imports = {}
    add_import(n, f.module.modname, f.module.is_package, f.local_imports)


def _h_yield(f: Facts, n) -> None:
    if type(n.value) is ast.Name:
        f.escapes.append((n.value.id, f._stmt))


def _h_namedexpr(f: Facts, n) -> None:
    f._store_target(n.target, f.infer(n.value), f._stmt, at=(n.end_lineno, n.end_col_offset))


def _h_comprehension(f: Facts, n) -> None:
    # ``[make_graphed_callables(layer, ...) for layer in self.layers]``: a layer of the ModuleList's class
    kind = element_kind(f.infer(n.iter)) if type(n.target) is ast.Name else None
    f._store_target(n.target, kind, f._stmt, loop_target=True, at=(f._stmt.lineno, f._stmt.col_offset))


_HANDLERS = {
    ast.Assign: _h_assign,
    ast.AnnAssign: _h_annassign,
    ast.AugAssign: _h_augassign,
    ast.If: _h_if,
    ast.While: _h_if,
    ast.Assert: _h_assert,
    ast.IfExp: _h_ifexp,
    ast.BoolOp: _h_boolop,
    ast.UnaryOp: _h_unary,
    ast.Call: _h_call,
    ast.Subscript: _h_subscript,
    ast.FormattedValue: _h_fstring,
    ast.With: _h_with,
    ast.AsyncWith: _h_with,
    ast.Name: _h_name,
    ast.Attribute: _h_attribute,
    ast.Delete: _h_delete,
    ast.Global: _h_global,
    ast.Import: _h_import,
    ast.ImportFrom: _h_import,
    ast.Yield: _h_yield,
    ast.NamedExpr: _h_namedexpr,
    ast.comprehension: _h_comprehension,
}

_BUILTINS = frozenset(
    "print bool int float complex str repr format open input len super isinstance range list dict iter next zip enumerate".split()
)


def _kw(call: ast.Call, name: str):
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def _device_literal(node) -> str | None:
    """'cuda' / 'cpu' / None for a device argument we can read without running anything."""
    t = type(node)
    if t is ast.Constant and isinstance(node.value, str):
        return node.value.split(":")[0]
    if t is ast.Call:
        parts = dotted(node.func)
        if parts and parts[-1] == "device" and node.args:
            return _device_literal(node.args[0])
    return None


def _is_cpu_device_call(e: ast.Call) -> bool:
    target = e.args[0] if e.args else _kw(e, "device")
    return target is not None and _device_literal(target) == "cpu"


def _is_tensor_annotation(node) -> bool:
    """``Tensor``, ``torch.Tensor``, and the optional forms ``Optional[Tensor]``, ``Tensor | None``,
    ``Union[Tensor, None]`` (a value that, when present, is a tensor)."""
    t = type(node)
    if t is ast.Constant and isinstance(node.value, str):
        try:
            return _is_tensor_annotation(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return False
    if t is ast.BinOp and type(node.op) is ast.BitOr:
        sides = (node.left, node.right)
        return any(_is_tensor_annotation(x) for x in sides) and all(
            _is_tensor_annotation(x) or (type(x) is ast.Constant and x.value is None) for x in sides)
    if t is ast.Subscript:
        parts = dotted(node.value)
        if not parts or parts[-1] not in ("Optional", "Union"):
            return False
        inner = node.slice
        members = inner.elts if type(inner) is ast.Tuple else [inner]
        return any(_is_tensor_annotation(m) for m in members) and all(
            _is_tensor_annotation(m) or (type(m) is ast.Constant and m.value is None) for m in members)
    parts = dotted(node)
    return parts is not None and ".".join(parts) in ("Tensor", "torch.Tensor")


_SCALAR_TYPES = frozenset(
    "str bool int float complex bytes list dict tuple set frozenset List Dict Tuple Set Callable Sequence Literal".split()
)
_WRAPPERS = frozenset(("Optional", "Union", "Literal", "List", "Dict", "Tuple", "Sequence", "Callable"))


def _is_scalar_annotation(node) -> bool:
    """``str``, ``bool``, ``Optional[int]``, ``int | None``, ``Literal["a"]``: never a tensor."""
    if node is None:
        return False
    t = type(node)
    if t is ast.Constant:
        if isinstance(node.value, str):
            try:
                node = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                return False
            return _is_scalar_annotation(node)
        return node.value is None
    if t is ast.BinOp and type(node.op) is ast.BitOr:
        return _is_scalar_annotation(node.left) and _is_scalar_annotation(node.right)
    if t is ast.Subscript:
        parts = dotted(node.value)
        if not parts or parts[-1] not in _WRAPPERS:
            return False
        if parts[-1] in ("Literal", "List", "Dict", "Tuple", "Sequence", "Callable"):
            return True
        inner = node.slice
        members = inner.elts if type(inner) is ast.Tuple else [inner]
        return all(_is_scalar_annotation(m) for m in members)
    parts = dotted(node)
    return bool(parts) and parts[-1] in _SCALAR_TYPES


def _param_defaults(args: ast.arguments) -> dict[str, ast.expr]:
    positional = [*args.posonlyargs, *args.args]
    out = {a.arg: d for a, d in zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True)}
    for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if d is not None:
            out[a.arg] = d
    return out


def _is_scalar_default(node) -> bool:
    """A default of ``"sbhd"``, ``False``, ``0``, ``1.0`` or ``(1, 2)``: a Python value, not a tensor."""
    if node is None:
        return False
    if type(node) is ast.Constant:
        return node.value is not None and node.value is not ...
    if type(node) is ast.UnaryOp and type(node.operand) is ast.Constant:
        return isinstance(node.operand.value, (int, float))
    if type(node) in (ast.Tuple, ast.List, ast.Dict):
        return True
    return False


def _used_as_tensor(fn, candidates: set[str], qual) -> set[str]:
    """Parameters the body treats as tensors, evidence from the whole body that they arrive as tensors:
    a method only tensors have (``x.softmax(-1)``, ``lengths[:, None].clamp()``, ``y.numel()``,
    ``mix.abs().amax()``), or the tensor argument of a torch operation (``torch.isnan(x)``,
    ``F.pad(x, ...)``, ``torch.cat([a, b])``); ``qual`` names what a call calls."""
    out: set[str] = set()
    if not candidates:
        return out
    for node in ast.walk(fn):
        if type(node) is not ast.Call:
            continue
        if type(node.func) is ast.Attribute:
            meth = node.func.attr
            if meth in _TENSOR_ONLY_METHODS or meth in _TENSOR_ONLY_MASK_METHODS or meth in _TENSOR_ONLY_QUERIES:
                base = node.func.value
                while type(base) is ast.Subscript or (type(base) is ast.Call and type(base.func) is ast.Attribute):
                    base = base.value if type(base) is ast.Subscript else base.func.value
                if type(base) is ast.Name and base.id in candidates:
                    out.add(base.id)
        if node.args and _tensor_operation(qual(node.func)):
            first = node.args[0]
            for item in first.elts if type(first) in (ast.List, ast.Tuple) else [first]:
                if type(item) is ast.Name and item.id in candidates:
                    out.add(item.id)
    # ``ids.device`` on a value that is never called and shows nothing of a module: a tensor's device.
    on_device = {n.value.id for n in ast.walk(fn) if type(n) is ast.Attribute and n.attr == "device"
                 and type(n.value) is ast.Name and n.value.id in candidates}
    if on_device - out:
        for n in ast.walk(fn):
            if type(n) is ast.Call and type(n.func) is ast.Name:
                on_device.discard(n.func.id)
            elif type(n) is ast.Attribute and n.attr in _MODULE_SIGNS and type(n.value) is ast.Name:
                on_device.discard(n.value.id)
        out |= on_device
    return out


_MODULE_SIGNS = frozenset("""parameters named_parameters modules named_modules children buffers state_dict config
    eval train forward generate""".split())


def _tensor_operation(q: str | None) -> bool:
    """``torch.isnan``, ``torch.nn.functional.pad``, ``torch.fft.rfft``: a torch operation whose first
    argument is a tensor (not a factory, a setting, a check or a constructor)."""
    if q is None or not q.startswith("torch."):
        return False
    name = q.rsplit(".", 1)[-1]
    if name.startswith(("is_", "set_", "get_", "_")):
        return False
    if q.count(".") == 1:
        return name[0].islower() and name not in _TORCH_NON_TENSOR and name not in _CPU_FACTORIES
    return q[6 : -len(name) - 1] in _TORCH_TENSOR_SUBMODULES


# Reductions of arrays (tensors and NumPy arrays, which Dynamo traces as tensors), never of lists, numbers,
# strings or modules: on a value of unknown type, their result is taken for a tensor's.
_ARRAY_REDUCTIONS = frozenset("sum mean max min any all argmax argmin amax amin prod std var".split())
# Methods only tensors have whose result is not a tensor (or not always): evidence about the receiver only.
_TENSOR_ONLY_QUERIES = frozenset("numel nelement ndimension dim element_size amax amin topk chunk unbind norm".split())
_TO_DEVICE = frozenset(("cuda", "to", "pin_memory"))
_MODULE_CONTAINERS = frozenset(("torch.nn.Sequential", "torch.nn.ModuleList"))
_TENSOR_RETURNING = frozenset(("torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_value_",
                               "torch.nn.utils.get_total_norm"))
# Mask-producing methods only tensors have (NumPy has these as functions, not methods).
_TENSOR_ONLY_MASK_METHODS = frozenset("logical_not logical_and logical_or logical_xor isfinite isnan isinf".split())
# Methods that only tensors have (not NumPy arrays, lists, strings, dicts or modules): their result is a tensor.
_TENSOR_ONLY_METHODS = frozenset(
    """softmax log_softmax masked_fill masked_fill_ masked_scatter unsqueeze contiguous view view_as expand
    expand_as permute sigmoid relu silu gelu bmm baddbmm addmm new_zeros new_ones new_empty new_full
    new_tensor index_select index_add index_copy index_fill scatter scatter_add scatter_reduce gather narrow
    unflatten type_as detach logsumexp softplus clamp clamp_min clamp_max masked_select nan_to_num float_power
    addcmul addcdiv lerp long norm""".split()
)


def is_self_attr(node, self_name) -> bool:
    return type(node) is ast.Attribute and type(node.value) is ast.Name and node.value.id == self_name


def _decorator_name(node) -> str | None:
    parts = dotted(node.func if type(node) is ast.Call else node)
    return parts[-1] if parts else None


def _returns_kind(fn, module: ModuleIndex, qual: str, project: Project):
    ann = getattr(fn, "returns", None)
    if ann is not None and _is_tensor_annotation(ann):
        return TENSOR
    returns = [n.value for n in ast.walk(fn) if type(n) is ast.Return and n.value is not None]
    if returns and all(_makes_tensor(value) for value in returns):
        return TENSOR  # ``return torch.cat([...])``: every return builds a tensor with a torch function
    return _lazy_singleton(fn, module, returns, project)


def _lazy_singleton(fn, module: ModuleIndex, returns: list, project: Project):
    """``global _MODEL; if _MODEL is None: _MODEL = TinyESR().cuda().eval(); return _MODEL``: a module of the
    file's class the function builds once and hands out (a model; a cache or a registry built so is left
    alone: its bookkeeping at capture is by design)."""
    if len(returns) != 1 or type(returns[0]) is not ast.Name:
        return None
    name = returns[0].id
    if not any(type(n) is ast.Global and name in n.names for n in ast.walk(fn)):
        return None
    for node in ast.walk(fn):
        if type(node) is ast.Assign and any(type(t) is ast.Name and t.id == name for t in node.targets):
            value = node.value
            while type(value) is ast.Call and type(value.func) is ast.Attribute:  # ``.cuda().eval().half()``
                value = value.func.value
            cls = module.classes.get(value.func.id) if type(value) is ast.Call and type(value.func) is ast.Name else None
            if cls is not None and cls.is_module(project):
                return ("inst", cls)
    return None


# torch.<name> functions that build a tensor (an allow-list: torch has many that return dtypes,
# devices, flags or modules).
_TORCH_TENSOR_FUNCS = frozenset(
    """tensor as_tensor from_numpy zeros ones empty full arange linspace logspace eye rand randn randint randperm
    zeros_like ones_like empty_like full_like rand_like randn_like randint_like cat concat concatenate stack
    where tril triu exp log sqrt matmul einsum outer cumsum clamp mean sum prod abs sigmoid tanh softmax
    log_softmax norm square mm bmm""".split()
)


def _makes_tensor(value) -> bool:
    """``torch.cat([...])``, and arithmetic on one (``200 * torch.mean(err)``)."""
    if type(value) is ast.BinOp:
        sides = (value.left, value.right)
        return any(_makes_tensor(x) for x in sides) and all(_makes_tensor(x) or type(x) is ast.Constant for x in sides)
    parts = dotted(value.func) if type(value) is ast.Call else None
    return bool(parts) and len(parts) == 2 and parts[0] == "torch" and parts[1] in _TORCH_TENSOR_FUNCS


def argument_kinds(facts, node: ast.Call, target: FuncRef) -> dict:
    """Kinds of the arguments at a call, keyed by the callee's parameter names."""
    params = target.positional_params
    if type(node.func) is ast.Attribute and node.func.attr == "apply" and params and params[0] == "ctx":
        if target.name != "forward":
            return {}  # the backward an ``apply`` leads to gets the gradients, not these arguments
        params = params[1:]  # ``MyFn.apply(x, w)`` fills ``forward(ctx, x, w)`` after the context
    out = {}
    for i, arg in enumerate(node.args):
        if type(arg) is ast.Starred or i >= len(params):
            break
        kind = facts.infer(arg)
        if kind is not None:
            out[params[i]] = kind
    for kw in node.keywords:
        if kw.arg is not None:
            kind = facts.infer(kw.value)
            if kind is not None:
                out[kw.arg] = kind
    return out


# -- the analysis of a project: each function's facts, computed once ---------------------------------
def facts_of(project: Project, fref: FuncRef) -> Facts:
    """The facts of a function (cached on the project: each function is analysed once)."""
    facts = project.facts_cache.get(fref.key)
    if facts is None:
        facts = Facts(fref, project)
        project.facts_cache[fref.key] = facts
        facts.scan()
    return facts


def fresh_facts(project: Project, fref: FuncRef) -> Facts:
    """Facts for a side question (attribute kinds, globals), not cached: the cached ones should see
    the argument kinds of the call that reaches the function first."""
    cached = project.facts_cache.get(fref.key)
    if cached is not None and cached.scanned:  # not one still being walked (it would be partial)
        return cached
    facts = Facts(fref, project)
    facts.scan()
    return facts


def module_facts(project: Project, module: ModuleIndex) -> Facts:
    return facts_of(project, module.body_ref)


class ClassAttrs:
    """What a class's methods assign to ``self``: kinds of attributes and scalars mutated per step."""

    def __init__(self):
        self.kinds: dict[str, object] = {}
        self.scalar_updates: dict[str, int] = {}  # attr -> line of an update outside __init__
        self.hooks: list[ast.Call] = []  # self.register_*hook(...) calls, and those on its parts (self.enc)


def class_attrs(cls: ClassIndex, project: Project) -> ClassAttrs:
    """What a class's methods assign to ``self`` (computed once per class)."""
    if cls._attrs is None:
        cls._attrs = ClassAttrs()  # seen while computing (a method that reads self.X)
        cls._attrs = _class_attrs(cls, project)
    return cls._attrs


def attr_kind(cls: ClassIndex, attr: str, project: Project):
    """The kind of ``self.<attr>`` in a class or its bases, or None."""
    for klass in cls.mro(project):
        kind = class_attrs(klass, project).kinds.get(attr)
        if kind is not None:
            return kind
    return None


def _class_attrs(cls: ClassIndex, project: Project) -> ClassAttrs:
    """Kinds of ``self.X`` from every method's assignments, and scalar attributes updated per call."""
    out = ClassAttrs()
    for name, node in cls.methods.items():
        ref = FuncRef(cls.module, node, cls, name)
        if name == "__init__" and project.before_constructor is not None:
            project.before_constructor(ref)  # ``GraphRunner(TinyDecoder())``: what self.model holds
        facts = fresh_facts(project, ref)
        for attr, stmt, value, kind in facts.self_stores:
            if value is not None:
                if kind is not None:
                    out.kinds.setdefault(attr, kind)
                elif name != "__init__" and type(stmt) is ast.Assign and not _mentions_tensor(facts, value):
                    out.scalar_updates.setdefault(attr, stmt.lineno)
            elif type(stmt) is ast.AugAssign and type(stmt.value) is ast.Constant:
                if isinstance(stmt.value.value, (int, float)) and not isinstance(stmt.value.value, bool):
                    out.scalar_updates.setdefault(attr, stmt.lineno)
        for call in facts.calls:
            if call.meth in ("register_buffer", "register_parameter") and type(call.node.func.value) is ast.Name:
                if call.node.func.value.id == facts.self_name and call.node.args:
                    key = call.node.args[0]
                    if type(key) is ast.Constant and isinstance(key.value, str):
                        out.kinds.setdefault(key.value, TENSOR)
            elif call.meth and call.meth.startswith("register_") and call.meth.endswith("hook"):
                value = call.node.func.value
                while type(value) in (ast.Attribute, ast.Subscript):  # ``self.enc.register_...``: a part
                    value = value.value
                if type(value) is ast.Name and value.id == facts.self_name:
                    out.hooks.append(call.node)
    for attr in list(out.scalar_updates):
        if is_tensor(out.kinds.get(attr)) or type(out.kinds.get(attr)) is tuple:
            del out.scalar_updates[attr]
    return out


def _mentions_tensor(facts: Facts, value) -> bool:
    if type(value) is ast.Constant:
        return False
    for node in ast.walk(value):
        if type(node) is ast.Call:
            return True  # a call's result is unknown: do not call it a scalar
    return False


def mutable_globals(module: ModuleIndex, project: Project) -> dict[str, int]:
    """Module-level names that are rebound after they are first set (computed once per module)."""
    if module._mutable_globals is None:
        module._mutable_globals = {}
        module._mutable_globals = _mutable_globals(module, project)
    return module._mutable_globals


def _mutable_globals(module: ModuleIndex, project: Project) -> dict[str, int]:
    """Module-level names that are rebound after they are first set (scalars that change per step)."""
    out: dict[str, int] = {}
    facts = module_facts(project, module)
    if facts is None:
        return out
    seen: set[str] = set()
    for store in facts.stores:
        if is_tensor(store.kind) or type(store.kind) is tuple:
            continue
        if store.aug or store.loop or store.name in seen:
            if not store.loop_target:
                out.setdefault(store.name, store.node.lineno)
        seen.add(store.name)
    if "global" in module.text:
        for name, node in module.defs.items():
            fn_facts = fresh_facts(project, FuncRef(module, node, None, name))
            for store in fn_facts.stores:
                if store.name in fn_facts.global_names and not is_tensor(store.kind):
                    out.setdefault(store.name, store.node.lineno)
    for name in list(out):
        if is_tensor(facts.kinds.get(name)) or type(facts.kinds.get(name)) is tuple:
            del out[name]
    return out
