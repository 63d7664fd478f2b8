"""CG2xx: dynamic control flow and data-dependent shapes."""

from __future__ import annotations

import ast

from cgkit.check import around as near
from cgkit.check.facts import CPU, MASK, is_tensor
from cgkit.check.model import Rule
from cgkit.check.names import dotted
from cgkit.check.rules._base import Calls, Each, Family, Region, code, found, text_of

RULES = Family()


@RULES.rule(
    Rule(
        code="CG201",
        name="tensor-condition",
        category="dynamic-control-flow",
        message="Python control flow on a tensor value: the branch is read on the host; capture fails here",
        compile_message="Python control flow on a tensor value: graph break here",
        fix="Compute both sides and select with `torch.where(cond, a, b)`; or move the decision outside the region.",
        what="Checks for `if`, `while`, `assert`, `and`/`or`/`not` and conditional expressions whose condition is a tensor.",
        why="Python decides a branch on the host, so a tensor condition is converted to `bool`, which "
        "waits for the GPU. Under manual capture this fails. Even when the condition is computed "
        "before capture, a graph records only the branch that was taken and replays it forever. "
        "Under `torch.compile` the condition causes a graph break.",
        example=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                if x.sum() > 0:
                    y = x * 2
                else:
                    y = x
        """),
        use_instead=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = torch.where(x.sum() > 0, x * 2, x)
            g.replay()
        """),
        gpu_check="ok = torch.equal(y, x * 2 if x.sum() > 0 else x)",
    ),
    Each("conds"),
)
def tensor_condition(item, f):
    expr, stmt = item
    if is_tensor(f.infer(expr)):
        yield found(expr, stmt)


_SHAPE_FUNCS = {
    "torch.nonzero": "torch.nonzero",
    "torch.argwhere": "torch.argwhere",
    "torch.masked_select": "torch.masked_select",
    "torch.unique": "torch.unique",
    "torch.unique_consecutive": "torch.unique_consecutive",
    "torch.bincount": "torch.bincount",
}
_SHAPE_METHODS = {"nonzero", "argwhere", "masked_select", "bincount"}
_SHAPE_METHODS_NEED_TENSOR = {"unique", "unique_consecutive"}


@RULES.rule(
    Rule(
        code="CG202",
        name="dynamic-shape-op",
        category="dynamic-shape",
        message="`{what}` has an output size that depends on the data; capture fails here",
        compile_message="`{what}` has a data-dependent output size: graph break (or an eager partition) here",
        fix="Use a fixed-size formulation: a mask (`torch.where(m, x, 0)`), `nonzero_static(size=...)`, or padding to a maximum size.",
        what="Checks for ops whose output shape depends on tensor values: `nonzero`, `argwhere`, one-argument "
        "`torch.where`, `masked_select`, `unique`, `unique_consecutive` and `bincount`.",
        why="A graph has fixed shapes, and to allocate these outputs the host must first read how many "
        "elements there are, which synchronizes. Under manual capture this fails; under `torch.compile` "
        "it breaks the graph or leaves the op in a partition that is not captured.",
        example=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                idx = x.nonzero()
        """),
        use_instead=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                positive = torch.where(x > 0, x, 0.0)  # same shape every time
            g.replay()
        """),
        gpu_check="ok = torch.equal(positive, torch.where(x > 0, x, 0.0))",
    ),
    Calls(quals=(*_SHAPE_FUNCS, "torch.where"), methods=(*_SHAPE_METHODS, *_SHAPE_METHODS_NEED_TENSOR)),
)
def dynamic_shape_op(c, f):
    node, q = c.node, c.qual
    if q in _SHAPE_FUNCS:
        if not (node.args and f.infer(node.args[0]) is CPU):  # sizing a host tensor's result reads no GPU
            yield found(node, c.stmt, what=_SHAPE_FUNCS[q])
    elif q == "torch.where":
        if len(node.args) == 1 and not node.keywords:
            yield found(node, c.stmt, what="torch.where(condition)")
    elif type(c.recv) is not tuple and c.recv is not CPU:
        if c.meth in _SHAPE_METHODS or is_tensor(c.recv):
            yield found(node, c.stmt, what=f".{c.meth}()")


@RULES.rule(
    Rule(
        code="CG203",
        name="boolean-mask-index",
        category="dynamic-shape",
        message="indexing with a boolean mask returns a data-dependent number of elements; capture fails here",
        compile_message="indexing with a boolean mask has a data-dependent size: graph break (or an eager partition) here",
        fix="Keep the shape: `torch.where(mask, x, 0)` (then reduce), or `x.masked_fill(~mask, 0)`.",
        what="Checks for reading `x[mask]` with a boolean tensor mask inside a captured region.",
        why="`x[mask]` is `masked_select` in disguise: the host must read how many elements are true to "
        "size the result. Assigning through a mask (`x[mask] = 0`) keeps the shape and is fine.",
        example=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                total = x[x > 0].sum()
        """),
        use_instead=code("""
            import torch

            x = torch.randn(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                total = torch.where(x > 0, x, 0.0).sum()
            g.replay()
        """),
        gpu_check="ok = torch.allclose(total, x[x > 0].sum())",
    ),
    Each("subscripts"),
)
def boolean_mask_index(item, f):
    sub, stmt = item
    index = sub.slice
    value_kind = None
    for entry in index.elts if type(index) is ast.Tuple else (index,):
        if type(entry) is ast.Slice:
            continue
        if type(entry) is ast.Compare and _same(entry.left, sub.value) and not _identity_compare(entry):
            yield found(sub, stmt)
            continue
        kind = f.infer(entry)
        if kind is None and type(entry) is ast.Compare and not _identity_compare(entry) \
                and not any(type(side) is ast.Constant and isinstance(side.value, str) for side in (entry.left, *entry.comparators)):
            kind = MASK if is_tensor(f.infer(sub.value)) else None  # ``model(x)[gt > 0]``: a tensor indexed by a comparison
        if kind is MASK or (is_tensor(kind) and _named_mask(entry)):
            if value_kind is None:
                value_kind = f.infer(sub.value)
            if value_kind is not CPU:
                yield found(sub, stmt)


def _named_mask(node) -> bool:
    """A tensor called ``mask`` (``pad_mask``, ``self.keep_mask``...), or the negation of a tensor
    (``~self_mask``: ``~`` of an index is a boolean one's): indexing with it selects elements."""
    if type(node) is ast.UnaryOp and type(node.op) is ast.Invert:
        return True
    name = node.id if type(node) is ast.Name else node.attr if type(node) is ast.Attribute else ""
    return "mask" in name.lower()


def _same(a, b) -> bool:
    return type(a) is type(b) and ast.dump(a) == ast.dump(b)


def _identity_compare(node: ast.Compare) -> bool:
    return any(type(op) in (ast.Is, ast.IsNot, ast.In, ast.NotIn) for op in node.ops)


@RULES.rule(
    Rule(
        code="CG204",
        name="tensor-slice-bound",
        category="dynamic-shape",
        message="a slice bound `{what}` is a tensor: the host reads it to size the view; capture fails here",
        compile_message="a slice bound `{what}` is a tensor: graph break (data-dependent size) here",
        fix="Slice with Python ints fixed at capture time, or keep the full shape and mask the unused part.",
        what="Checks for slicing with bounds that are tensors, such as `x[lengths[0]:lengths[1]]`.",
        why="A slice is computed on the host, so tensor bounds are read back from the GPU, which "
        "synchronizes; and the view's size changes with the data, which a graph cannot follow.",
        example=code("""
            import torch

            x = torch.randn(64, device="cuda")
            bounds = torch.tensor([8, 24], device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                part = x[bounds[0] : bounds[1]].sum()
        """),
        use_instead=code("""
            import torch

            x = torch.randn(64, device="cuda")
            bounds = torch.tensor([8, 24], device="cuda")
            pos = torch.arange(64, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                inside = (pos >= bounds[0]) & (pos < bounds[1])
                part = torch.where(inside, x, 0.0).sum()
            g.replay()
        """),
        gpu_check="ok = torch.allclose(part, x[8:24].sum())",
    ),
    Each("subscripts"),
)
def tensor_slice_bound(item, f):
    sub, stmt = item
    index = sub.slice
    for entry in index.elts if type(index) is ast.Tuple else (index,):
        if type(entry) is ast.Slice:
            for bound in (entry.lower, entry.upper, entry.step):
                if bound is not None and is_tensor(f.infer(bound)):
                    yield found(bound, stmt, what=text_of(bound))
                    break


@RULES.rule(
    Rule(
        code="CG205",
        name="repeat-interleave-no-output-size",
        category="dynamic-shape",
        message="`repeat_interleave` with tensor repeats and no `output_size` sums the repeats on the host; capture fails here",
        compile_message="`repeat_interleave` with tensor repeats and no `output_size`: data-dependent size, graph break here",
        fix="Pass `output_size=` (the known total length) so no host read is needed.",
        what="Checks for `repeat_interleave` with a tensor of repeats and no `output_size` argument.",
        why="Without `output_size`, PyTorch sums the repeats on the host to size the output, which "
        "synchronizes. With `output_size` the size is known and the op can be captured.",
        example=code("""
            import torch

            x = torch.randn(4, device="cuda")
            reps = torch.tensor([1, 2, 3, 2], device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x.repeat_interleave(reps)
        """),
        use_instead=code("""
            import torch

            x = torch.randn(4, device="cuda")
            reps = torch.tensor([1, 2, 3, 2], device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x.repeat_interleave(reps, output_size=8)
            g.replay()
        """),
        gpu_check="ok = torch.equal(y, x.repeat_interleave(reps))",
    ),
    Calls(quals=("torch.repeat_interleave",), methods=("repeat_interleave",)),
)
def repeat_interleave_no_output_size(c, f):
    node = c.node
    if c.kwarg("output_size") is not None:
        return
    if c.qual is not None:
        if len(node.args) == 1 and not node.keywords:
            yield found(node, c.stmt)
            return
        reps = c.arg(1, "repeats")
    elif type(c.recv) is tuple or c.recv is CPU:
        return
    else:
        reps = c.arg(0, "repeats")
    if reps is not None and is_tensor(f.infer(reps)):
        yield found(node, c.stmt)


@RULES.rule(
    Rule(
        code="CG206",
        name="input-shape-changes-between-calls",
        category="dynamic-shape",
        message="`{what}` changes shape from call to call of the compiled function ({how})",
        compile_message="`{what}` changes shape from call to call ({how}): cudagraph "
        "trees record a new CUDA graph for each new shape",
        fix="Pad the input to one shape (or a few bucket sizes) and mask the padding, or compile this call without "
        "CUDA graphs (`mode=\"max-autotune-no-cudagraphs\"`, `dynamic=True`).",
        manual=None,
        compile="warning",
        what="Checks for a function compiled with CUDA graphs that is called in a loop with a tensor sliced by "
        "bounds the loop changes (`x[:, :t]` with `t` the loop variable, `book[t - w:t]`, a crop box read per "
        "item), with a tensor made in the call at a size the loop changes (`f(torch.randn(n, n))` for `n` in "
        "a loop over numbers), with a tensor the loop makes longer (`idx = torch.cat([idx, nxt], dim=1)`, also read through a "
        "fixed window, `idx[:, -block_size:]`, which grows until it is full), or with rows a boolean mask "
        "selects (`obs[alive]`, `X[scores > 0.5]`: as many as the data says), "
        "directly or through the names it is bound to. A fixed-width window (`x[i:i + n]`, `idx[:, -1:]`) keeps its "
        "shape and is not reported.",
        why="A CUDA graph replays fixed shapes. Called with a new shape, the compiled function is recompiled "
        "once with that dimension dynamic, and from then on cudagraph trees record one more graph for every "
        "distinct size they see. Measured on torch 2.11 (H200, benchmarks/compiled_shapes.py): a growing "
        "prefix over 20 calls compiled 2 frames, logged \"We have observed 9 distinct sizes\", and its last 10 "
        "calls took 4.0 ms each against 0.12 ms for the same function at one shape.",
        example=code("""
            import torch

            w = torch.randn(64, 64, device="cuda")
            step = torch.compile(lambda x: torch.tanh(x @ w).sum(-1), mode="reduce-overhead")
            tokens = torch.randn(8, 32, 64, device="cuda")
            for t in range(1, 33):
                step(tokens[:, :t])
        """),
        use_instead=code("""
            import torch

            w = torch.randn(64, 64, device="cuda")
            step = torch.compile(lambda x, n: (torch.tanh(x @ w) * (torch.arange(32, device="cuda") < n)[:, None]).sum(-1),
                                 mode="reduce-overhead")
            tokens = torch.randn(8, 32, 64, device="cuda")
            count = torch.zeros((), device="cuda")
            for t in range(1, 33):
                count.fill_(t)
                step(tokens, count)  # one shape: the prefix is masked, not sliced
        """),
        gpu_skip="nothing fails and the results are right: the cost is a new recording per shape, measured on an "
        "H200 with torch 2.11 (benchmarks/h200-2026-12-01-optlr/compiled-shapes.jsonl)",
        trace=None,
        trace_blind="the shape changes between iterations of the caller's loop, and a trace runs one step",
    ),
    Region(),
)
def input_shape_changes_between_calls(region, ctx):
    if region.klass != "compile":
        return
    for inv in near.invocations(region, ctx):
        facts, call = inv.facts, inv.call.node
        args = [*call.args, *(kw.value for kw in call.keywords)]
        selected = next((m for m in (_mask_selected(facts, a, call.lineno) for a in args) if m is not None), None)
        if selected is not None:  # ``fn(obs[alive])``: each call brings as many rows as the mask keeps
            yield found(call, module=facts.module, what=text_of(selected), how="a boolean mask selects its rows")
            continue
        if not inv.loops:
            continue
        loops = [lp for lp in facts.loops if lp.lineno <= call.lineno <= lp.end_lineno]  # the loops around the call
        for arg in args:
            sliced = _sliced_per_iteration(facts, arg, loops, call.lineno)
            if sliced is not None:
                yield found(call, module=facts.module, what=text_of(sliced), how="its slice bounds change in the loop")
                break
            grown = _grown_per_iteration(facts, arg, loops)
            if grown is not None:
                yield found(call, module=facts.module, what=text_of(arg),
                            how=f"the loop makes `{grown}` longer with `torch.cat` on every iteration")
                break
            size = _sized_per_iteration(facts, arg, loops)
            if size is not None:
                yield found(call, module=facts.module, what=text_of(arg), how=f"its size `{size}` changes in the loop")
                break


def _mask_selected(facts, expr, line: int, depth: int = 0):
    """The mask-indexed subscript an argument is (``obs[alive]``, ``X[sel]`` with ``sel = y > 0``), directly
    or through the name it was last bound to before ``line``, or None."""
    if depth > 3 or expr is None:
        return None
    t = type(expr)
    if t is ast.Subscript:
        parts = expr.slice.elts if type(expr.slice) is ast.Tuple else [expr.slice]
        if any(type(p) is not ast.Slice and _is_mask(facts, p) for p in parts):
            return expr
        return None
    if t is ast.Call and type(expr.func) is ast.Attribute and expr.func.attr in ("cuda", "to", "contiguous", "float"):
        return _mask_selected(facts, expr.func.value, line, depth + 1)
    if t is ast.Name:
        bound = [s for s in facts.stores if s.name == expr.id and s.node.lineno < line and not s.loop_target
                 and type(s.node) is ast.Assign]
        if bound:
            return _mask_selected(facts, bound[-1].node.value, line, depth + 1)
    return None


def _is_mask(facts, index) -> bool:
    """A boolean tensor index: a comparison of a tensor, its negation, or a name the checker knows is one."""
    if type(index) is ast.UnaryOp and type(index.op) is ast.Invert:
        index = index.operand
    if type(index) is ast.Compare:
        return is_tensor(facts.infer(index.left))
    return facts.infer(index) is MASK


def _sliced_per_iteration(facts, expr, loops, line: int, depth: int = 0):
    """The subscript in ``expr`` (or in what its names were last bound to inside the loop) whose slice
    bounds change from one iteration to the next, or None."""
    if depth > 4 or expr is None:
        return None
    t = type(expr)
    if t is ast.Subscript:
        parts = expr.slice.elts if type(expr.slice) is ast.Tuple else [expr.slice]
        for part in parts:
            if type(part) is ast.Slice and _changing_bounds(facts, part, loops) and not _fixed_width(part):
                return expr
        return _sliced_per_iteration(facts, expr.value, loops, line, depth + 1)
    if t is ast.BinOp:
        return _sliced_per_iteration(facts, expr.left, loops, line, depth + 1) or \
            _sliced_per_iteration(facts, expr.right, loops, line, depth + 1)
    if t is ast.Call:
        parts = dotted(expr.func)
        if parts and "pad" in parts[-1].lower():  # ``F.pad(x, (0, 0, 0, N - n))``: padded back to one shape
            return None
        inner = expr.func.value if type(expr.func) is ast.Attribute else None  # ``crop.cuda()``, ``x.clone()``
        for sub in [inner, *expr.args]:
            found_here = _sliced_per_iteration(facts, sub, loops, line, depth + 1)
            if found_here is not None:
                return found_here
        return None
    if t is ast.Name:
        bound = [s for s in facts.stores if s.name == expr.id and s.node.lineno < line and not s.loop_target
                 and type(s.node) is ast.Assign and _in_loops(s.node.lineno, loops)]
        if bound:
            return _sliced_per_iteration(facts, bound[-1].node.value, loops, line, depth + 1)
    return None


_CONCATS = frozenset(("torch.cat", "torch.concat", "torch.concatenate", "torch.hstack", "torch.vstack", "torch.column_stack"))


def _grown_per_iteration(facts, expr, loops) -> str | None:
    """The name an argument is (or slices with constant bounds: ``idx[:, -block_size:]``) that the loop
    rebinds to a concatenation with itself (``idx = torch.cat([idx, nxt], dim=1)``): a longer tensor on each
    call. The last element alone (``idx[:, -1:]``, ``idx[:, -1]``) keeps one shape."""
    if type(expr) is ast.Subscript:
        parts = expr.slice.elts if type(expr.slice) is ast.Tuple else [expr.slice]
        if any(type(p) is not ast.Slice or _last_only(p) or _changing_bounds(facts, p, loops) for p in parts
               if not (type(p) is ast.Slice and p.lower is None and p.upper is None)):
            return None
        expr = expr.value
    if type(expr) is not ast.Name:
        return None
    for s in facts.stores:
        value = getattr(s.node, "value", None)
        if s.name == expr.id and type(s.node) is ast.Assign and _in_loops(s.node.lineno, loops) \
                and type(value) is ast.Call and facts.qual(value.func) in _CONCATS and value.args \
                and type(value.args[0]) in (ast.List, ast.Tuple) \
                and any(type(e) is ast.Name and e.id == expr.id for e in value.args[0].elts):
            return expr.id
    return None


_FACTORIES = frozenset(f"torch.{name}" for name in ("randn", "rand", "zeros", "ones", "empty", "full", "randint", "arange"))


def _sized_per_iteration(facts, expr, loops) -> str | None:
    """``torch.randn(n, n, device="cuda")`` made in the call, with a size the loop changes (``for n in (16, 24,
    32)``): a new shape on each call."""
    if type(expr) is not ast.Call or facts.qual(expr.func) not in _FACTORIES:
        return None
    for arg in expr.args:
        for name in (n for n in ast.walk(arg) if type(n) is ast.Name):
            if any(s.name == name.id and _in_loops(s.node.lineno, loops)
                   and (near.python_number_binding(s, facts) or near.number_loop_target(s)) for s in facts.stores):
                return name.id
    return None


def _last_only(part: ast.Slice) -> bool:
    """``[-1:]``: one element, whatever the length."""
    lower = part.lower
    return part.upper is None and type(lower) is ast.UnaryOp and type(lower.op) is ast.USub \
        and type(lower.operand) is ast.Constant and lower.operand.value == 1


def _in_loops(line: int, loops) -> bool:
    return any(lp.lineno <= line <= lp.end_lineno for lp in loops)


def _changing_bounds(facts, part: ast.Slice, loops) -> bool:
    """A bound that names a loop variable or a name the loop rebinds."""
    for bound in (part.lower, part.upper):
        for name in (n for n in ast.walk(bound) if type(n) is ast.Name) if bound is not None else ():
            if any(s.name == name.id and _in_loops(s.node.lineno, loops) for s in facts.stores):
                return True
    return False


def _fixed_width(part: ast.Slice) -> bool:
    """``x[i:i + n]``: the upper bound is the lower bound plus something, so the width stays the same."""
    upper, lower = part.upper, part.lower
    return type(upper) is ast.BinOp and type(upper.op) is ast.Add and lower is not None \
        and ast.dump(upper.left) == ast.dump(lower)
