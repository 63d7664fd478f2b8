"""The step to trace, built from the same options as ``cgkit scaffold`` (or the user's own ``--step``).

The step is what a recipe would capture: ``model(*inputs)`` under ``no_grad`` in inference; in
training, forward, loss, backward and the optimizer step, with the optimizer a recipe would build
(a tensor learning rate, ``capturable=True`` on the GPU). On a CPU there is no capturable Adam:
the fused one stands in for it, with its step counters on the parameters' device as on the GPU.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from cgkit.errors import CgkitError
from cgkit.refs import Ref, parse_ref
from cgkit.trace.frames import Site

LEARNING_RATE = 1e-3


def load(text: str, role: str):
    """Import the object a ``path/to/file.py:name`` or ``package.module:name`` reference names."""
    ref: Ref = parse_ref(text, role)
    if ref.module is None:
        folder = str(ref.path.parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)  # the file's own sibling imports
        name = f"cgkit_user_{abs(hash(str(ref.path)))}"
        module = sys.modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, ref.path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
    else:
        if ref.local_root is not None and str(ref.local_root) not in sys.path:
            sys.path.insert(0, str(ref.local_root))
        module = importlib.import_module(ref.module)
    return getattr(module, ref.name), _definition_site(ref)


def _definition_site(ref: Ref) -> Site:
    """Where the referenced name is defined: the line a finding falls back to when the step is all
    library code (an ``nn.TransformerEncoder`` returned as it is, say)."""
    import ast

    try:
        tree = ast.parse(ref.path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return Site(str(ref.path), 1, ref.name)
    for node in tree.body:
        if getattr(node, "name", None) == ref.name:
            return Site(str(ref.path), node.lineno, ref.name)
        targets = getattr(node, "targets", None) or [getattr(node, "target", None)]
        if any(getattr(t, "id", None) == ref.name for t in targets if t is not None):
            return Site(str(ref.path), node.lineno, ref.name)
    return Site(str(ref.path), 1, ref.name)


# -- inputs ------------------------------------------------------------------------------------------


def map_tensors(fn, tree):
    if isinstance(tree, torch.Tensor):
        return fn(tree)
    if isinstance(tree, (tuple, list)):
        return type(tree)(map_tensors(fn, item) for item in tree)
    if isinstance(tree, dict):
        return {key: map_tensors(fn, value) for key, value in tree.items()}
    return tree


def split_inputs(inputs) -> tuple[tuple, dict]:
    """An inputs factory's result as (args, kwargs): a tuple, a dict, or an (args, kwargs) pair."""
    if isinstance(inputs, dict):
        return (), inputs
    if isinstance(inputs, torch.Tensor):
        return (inputs,), {}
    if (isinstance(inputs, tuple) and len(inputs) == 2 and isinstance(inputs[0], (tuple, list))
            and isinstance(inputs[1], dict)):
        return tuple(inputs[0]), dict(inputs[1])
    if isinstance(inputs, (tuple, list)):
        return tuple(inputs), {}
    raise CgkitError(
        f"--inputs returned {type(inputs).__name__}: return a tuple of positional inputs, a dict of "
        "keyword inputs, or an (args, kwargs) pair"
    )


def vary(tree, generator: torch.Generator):
    """The same shapes, dtypes and value range, other values: a random permutation of each tensor's
    elements (token ids stay valid ids). Boolean tensors (masks) keep their values: their layout
    often carries meaning (padding on one side). A one-element float is scaled instead."""

    def fresh(t: torch.Tensor) -> torch.Tensor:
        if t.dtype == torch.bool or t.numel() == 0:
            return t.clone()
        if t.numel() == 1:
            if t.is_floating_point():
                return t * (0.5 + torch.rand((), generator=generator).item())
            return t.clone()
        order = torch.randperm(t.numel(), generator=generator).to(t.device)
        return t.detach().reshape(-1)[order].reshape(t.shape).clone().requires_grad_(t.requires_grad)

    return map_tensors(fresh, tree)


# -- the step ----------------------------------------------------------------------------------------


@dataclass
class Step:
    """A callable the tracer calls once per traced call, with the inputs of that call."""

    run: object  # run(args, kwargs) -> output
    inputs: object  # the example inputs (the first call's); later calls vary them
    name: str  # what is traced, for the report: "model(*inputs)", "train_step"
    site: Site  # where the step is defined: the fallback user line
    forward: object = None  # forward(args, kwargs): what torch.compile compiles (the model call, or the step)
    compiled: bool = False  # the user's object was already torch.compile'd


def build_optimizer(name: str, model: torch.nn.Module, on_gpu: bool):
    """The optimizer a training recipe builds: a tensor learning rate, graph-safe step counters."""
    params = list(model.parameters())
    device = params[0].device if params else torch.device("cpu")
    lr = torch.tensor(LEARNING_RATE, device=device)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, fused=True)
    cls = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
    extra = {"weight_decay": 0.01} if name == "adamw" else {}
    if on_gpu:
        return cls(params, lr=lr, capturable=True, **extra)
    return cls(params, lr=lr, fused=True, **extra)  # the CPU's stand-in for capturable=True


def default_loss(output, *inputs):
    """The recipes' stand-in loss: any scalar that depends on every floating output element."""
    leaves = [t for t in _leaves(output) if isinstance(t, torch.Tensor) and t.is_floating_point()]
    if not leaves:
        raise CgkitError("the model's output has no floating-point tensor to take a loss from: pass --loss")
    return sum(t.float().pow(2).mean() for t in leaves)


def _leaves(tree):
    if isinstance(tree, torch.Tensor):
        yield tree
    elif isinstance(tree, (tuple, list)):
        for item in tree:
            yield from _leaves(item)
    elif isinstance(tree, dict):
        for item in tree.values():
            yield from _leaves(item)
    elif hasattr(tree, "__dataclass_fields__"):
        for name in tree.__dataclass_fields__:
            yield from _leaves(getattr(tree, name))


def model_step(model_ref: str, inputs_ref: str, training: bool, device: torch.device, loss_ref: str | None,
               optimizer: str, amp: str | None, recorder) -> Step:
    build_model, site = load(model_ref, "--model")
    build_inputs, _ = load(inputs_ref, "--inputs")
    loss_fn = load(loss_ref, "--loss")[0] if loss_ref else default_loss
    torch.manual_seed(0)
    model, compiled = uncompiled(_call_factory(build_model, "--model"))
    if not isinstance(model, torch.nn.Module):
        raise CgkitError(f"--model {model_ref!r} returned {type(model).__name__}, not a torch.nn.Module")
    model = model.to(device).train(training)
    inputs = map_tensors(lambda t: t.to(device), _call_factory(build_inputs, "--inputs"))
    split_inputs(inputs)  # a clear error now for an input structure we cannot call with
    autocast = _autocast(amp, device)

    def forward(args, kwargs):
        with autocast():
            return model(*args, **kwargs)

    if not training:
        def run(args, kwargs):
            with torch.no_grad():
                return forward(args, kwargs)

        return Step(run, inputs, "model(*inputs)", site, forward, compiled)

    opt = build_optimizer(optimizer, model, device.type == "cuda")
    recorder.ignore_optimizers[opt] = True  # cgkit's own choice: the user's model is what is traced

    def train_step(args, kwargs):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(forward(args, kwargs), *args, **kwargs)
        loss.backward()
        opt.step()
        return loss

    return Step(train_step, inputs, "training step (forward, loss, backward, optimizer)", site, forward, compiled)


def user_step(step_ref: str, inputs_ref: str | None, device: torch.device) -> Step:
    step, site = load(step_ref, "--step")
    if not callable(step):
        raise CgkitError(f"--step {step_ref!r} is not callable")
    step, compiled = uncompiled(step)
    inputs = ()
    if inputs_ref:
        build_inputs, _ = load(inputs_ref, "--inputs")
        inputs = map_tensors(lambda t: t.to(device), _call_factory(build_inputs, "--inputs"))
        split_inputs(inputs)
    elif _required_parameters(step):
        raise CgkitError(f"--step {step_ref!r} takes arguments: give --inputs, a factory for them")

    def run(args, kwargs):
        return step(*args, **kwargs)

    return Step(run, inputs, getattr(step, "__qualname__", step_ref), site, run, compiled)


def uncompiled(obj) -> tuple[object, bool]:
    """The function or module under a ``torch.compile`` wrapper, and whether there was one: the eager
    trace runs the original code (Dynamo is looked at separately)."""
    original = getattr(obj, "_orig_mod", None)  # a compiled nn.Module (OptimizedModule)
    if isinstance(original, torch.nn.Module):
        return original, True
    original = getattr(obj, "_torchdynamo_orig_callable", None)  # a compiled function
    if original is not None:
        return original, True
    return obj, False


def _required_parameters(fn) -> list[str]:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in parameters if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _call_factory(factory, role: str):
    try:
        return factory()
    except CgkitError:
        raise
    except Exception as exc:  # the user's factory failed: say which, with its own message
        raise CgkitError(f"{role} factory raised {type(exc).__name__}: {exc}") from exc


def _autocast(amp: str | None, device: torch.device):
    if not amp or amp == "none":
        return contextlib.nullcontext
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[amp]
    return lambda: torch.autocast(device.type, dtype=dtype, cache_enabled=False)


def resolve_device(choice: str) -> torch.device:
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice == "cuda" and not torch.cuda.is_available():
        raise CgkitError("--device cuda: no CUDA device is visible (or torch is a CPU build); use --device cpu")
    return torch.device(choice)


def script_path(path: str) -> Path:
    p = Path(path)
    if not p.is_file():
        raise CgkitError(f"no such script: {path}")
    return p
