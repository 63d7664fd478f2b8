"""The workflow registry and the renderer behind ``cgkit scaffold``.

Python decides, templates render: :func:`plan` validates the options and turns them into a
plain context (every choice already made), and :func:`render` fills the workflow's Jinja
template with it. Templates use ``StrictUndefined``, so a missing value is an error, not a blank.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, fields
from pathlib import Path

from cgkit import __version__
from cgkit.bundle import recipes_dir
from cgkit.errors import CgkitError
from cgkit.refs import Ref, parse_ref

MODES = ("inference", "training")
AMP_CHOICES = ("none", "bf16", "fp16")
OPTIMIZER_CHOICES = ("sgd", "adam", "adamw")
# Transformer Engine FP8 recipes (transformer_engine.common.recipe). H100/H200 run delayed, current
# and block; mxfp8 needs Blackwell (TE raises its own "compute capability 10.0" error elsewhere).
FP8_CHOICES = ("none", "delayed", "current", "block", "mxfp8")
MCORE_IMPLS = ("local", "transformer_engine")  # Megatron-Core per-layer graph implementations
EMIT_CHOICES = ("script", "flags")


@dataclass(frozen=True)
class Workflow:
    """One way of applying CUDA graphs, rendered from ``recipes/<template>``.

    What differs between workflows is said here, as data; :func:`plan` reads it and never
    branches on a workflow's name.
    """

    name: str
    summary: str
    template: str
    modes: tuple[str, ...]
    # Scaffold options this workflow takes beyond --mode/--model/--inputs; others are rejected.
    options: frozenset[str]
    captures: bool = True  # False for `profile`, which measures but captures nothing
    takes_model: bool = True  # False for the Megatron-Core recipes, which build their own GPT
    family: str = "torch"  # "te" or "megatron": the library whose graphing API it uses
    # The optimizer step runs inside the graph (it must be capturable; no GradScaler there).
    captures_optimizer: bool = False
    copies_inputs: bool = False  # the capture keeps static inputs and copies each new batch into them
    compiles: bool = False  # Inductor makes the kernels (its own rounding; cudagraph skips are logged)
    warmup_iters_ddp: int = 3  # eager iterations before capture under DDP
    mcore_impl: str | None = None  # Megatron-Core's cuda_graph_impl when fixed by the workflow


WORKFLOWS: dict[str, Workflow] = {
    wf.name: wf
    for wf in (
        Workflow(
            name="profile",
            summary="Profile the eager step with torch.profiler and estimate what a graph can gain.",
            template="profile.py.j2",
            modes=("inference", "training"),
            options=frozenset({"loss", "amp", "dtype", "optimizer"}),
            captures=False,
        ),
        Workflow(
            name="compile",
            summary='torch.compile(mode="reduce-overhead"): CUDA graphs through cudagraph trees.',
            template="compile.py.j2",
            modes=("inference", "training"),
            options=frozenset({"loss", "amp", "dtype", "optimizer", "static_io", "optimizer_step", "gradients"}),
            compiles=True,
        ),
        Workflow(
            name="callables",
            summary="torch.cuda.make_graphed_callables: graph forward and backward, optimizer stays eager.",
            template="callables.py.j2",
            modes=("training", "inference"),
            options=frozenset({"loss", "amp", "dtype", "optimizer", "layers", "ddp", "static_io"}),
        ),
        Workflow(
            name="manual",
            summary="torch.cuda.graph: capture the whole step yourself (inference, full training step, buckets, DDP).",
            template="manual.py.j2",
            modes=("inference", "training"),
            options=frozenset({"loss", "amp", "dtype", "optimizer", "buckets", "ddp", "fuse", "static_io", "gradients"}),
            captures_optimizer=True,
            copies_inputs=True,
            # PyTorch documents 11 eager warm-up iterations before capturing a DDP model (the
            # callables recipe graphs before wrapping in DDP, so 3 is enough there).
            warmup_iters_ddp=11,
        ),
        Workflow(
            name="te",
            summary="Transformer Engine make_graphed_callables over TE layers; FP8 optional, replayed under te.autocast.",
            template="te.py.j2",
            modes=("training",),
            options=frozenset({"loss", "optimizer", "layers", "fp8", "microbatches"}),
            family="te",
        ),
        Workflow(
            name="mcore-layer",
            summary="Megatron-Core per-layer graphs (cuda_graph_impl local or transformer_engine) on a small GPT.",
            template="mcore_layer.py.j2",
            modes=("training",),
            takes_model=False,
            options=frozenset({"impl", "microbatches", "emit"}),
            family="megatron",
        ),
        Workflow(
            name="mcore-full",
            summary="Megatron-Core full-iteration graph: FullCudaGraphWrapper around forward_backward_func.",
            template="mcore_full.py.j2",
            modes=("training",),
            takes_model=False,
            options=frozenset({"microbatches", "emit"}),
            family="megatron",
            mcore_impl="full_iteration",
        ),
    )
}

# Options that only make sense in one mode.
_TRAINING_ONLY = ("loss", "optimizer", "ddp", "optimizer_step", "gradients")
_INFERENCE_ONLY = ("buckets", "static_io")
OPTIMIZER_STEP_CHOICES = ("compiled", "eager")  # compile training: the optimizer step compiled too, or eager
# compile and manual --fuse training: the gradients from one compiled torch.func.grad_and_value
# (func; compile's default), or from the compiled model's forward and loss.backward() (autograd;
# manual --fuse's default).
GRADIENTS_CHOICES = ("func", "autograd")


@dataclass
class ScaffoldOptions:
    """What the user asked for. ``None`` means "not given" (so it can be told from a default)."""

    workflow: str
    mode: str | None = None
    model: str | None = None
    inputs: str | None = None
    loss: str | None = None
    amp: str | None = None
    dtype: str | None = None
    optimizer: str | None = None
    ddp: bool = False
    buckets: str | None = None
    layers: str | None = None
    fuse: bool = False
    static_io: bool = False
    optimizer_step: str | None = None
    gradients: str | None = None
    fp8: str | None = None
    microbatches: int | str | None = None
    impl: str | None = None
    emit: str | None = None
    # Where the rendered script will be written (file references are made relative to it).
    output: Path | None = None

    def given(self) -> list[str]:
        """Names of the workflow-specific options the user set."""
        return [name for name in _WORKFLOW_OPTIONS if getattr(self, name) not in (None, False)]


# The options a workflow may or may not take (its `options`), in the order commands show them.
_WORKFLOW_OPTIONS = ("loss", "amp", "dtype", "optimizer", "ddp", "buckets", "layers", "fuse", "static_io",
                     "optimizer_step", "gradients", "fp8", "microbatches", "impl", "emit")


def option_flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def options(workflow: str, **values) -> ScaffoldOptions:
    """ScaffoldOptions from CLI values (an unknown name is an error, not a silent extra)."""
    known = {f.name for f in fields(ScaffoldOptions)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise CgkitError(f"unknown scaffold option(s): {', '.join(option_flag(n) for n in unknown)}")
    return ScaffoldOptions(workflow=workflow, **values)


def workflow_table() -> str:
    """What `cgkit scaffold --list` prints: one line per workflow."""
    width = max(map(len, WORKFLOWS))
    return "".join(f"{wf.name:<{width}}  {wf.summary}\n" for wf in WORKFLOWS.values())


def workflow(name: str) -> Workflow:
    try:
        return WORKFLOWS[name]
    except KeyError:
        raise CgkitError(f"unknown workflow {name!r}; choose one of: {', '.join(WORKFLOWS)}") from None


@dataclass(frozen=True)
class Precision:
    """A dtype choice (``--amp`` or ``--dtype``): its option value and the torch dtype it names."""

    name: str
    dtype: str


@dataclass(frozen=True)
class Source:
    """How the script gets a user factory: imported from a module, loaded from a file, or the demo."""

    kind: str  # "module", "local_module", "file" or "demo"
    name: str | None = None
    module: str | None = None
    path: str | None = None  # for "file": relative to the script when it is written to a file
    root: str | None = None  # for "local_module": the folder to put on sys.path


@dataclass(frozen=True)
class OptimizerPlan:
    name: str
    cls: str
    lr: str  # "lr" (a device tensor made in make_optimizer) or "LEARNING_RATE" (a float)
    kwargs: str
    why: tuple[str, ...]  # comment lines above the optimizer: why these settings


@dataclass(frozen=True)
class Tolerance:
    """How close graphed must be to eager: rtol/atol on outputs, losses and parameters, and
    ``update_rtol`` on the parameter updates of the compared training steps (relative)."""

    rtol: str
    atol: str
    update_rtol: str
    why: str


@dataclass(frozen=True)
class Fp8Plan:
    name: str
    cls: str
    kwargs: str


@dataclass(frozen=True)
class TePlan:
    fp8: Fp8Plan | None
    microbatches: int
    cache_weights: bool  # FP8 weights cast once per step, reused by later microbatches


@dataclass(frozen=True)
class McorePlan:
    impl: str
    emit: str
    microbatches: int
    warmup_steps: int
    te_impl: bool
    spec: str
    flags: tuple[str, ...]  # the Megatron-LM flags that turn the same thing on
    config: dict[str, str]  # TransformerConfig fields, as Python source
    imports: tuple[tuple[str, str], ...]
    graphed_from: int  # steps that run eagerly before the graphs replay


@dataclass(frozen=True)
class Imports:
    stdlib: tuple[str, ...]
    third_party: tuple[str, ...]
    first_party: tuple[str, ...]


@dataclass(frozen=True)
class Plan:
    """Every decision behind one rendered recipe; the template only lays it out."""

    version: str
    command_lines: tuple[str, ...]
    imports: Imports
    workflow: str
    summary: str
    mode: str
    training: bool
    captures: bool
    compiles: bool
    template: str
    verify_template: str
    model: Source
    inputs: Source
    loss: Source | None
    loss_label: str  # what the report says the training loss is
    loaders: tuple[str, ...]  # the factory loaders the script defines ("file", "local_module")
    amp: Precision | None
    dtype: Precision | None
    optimizer: OptimizerPlan | None
    ddp: bool
    buckets: tuple[int, ...] | None
    buckets_literal: str | None
    layers: str | None
    fuse: bool  # Inductor-compiled kernels (its own CUDA graphs off), captured in one torch.cuda.graph
    static_io: bool  # the caller writes the static inputs and reads the static outputs: no copies
    compile_optimizer: bool  # compile training: the optimizer step compiled (and graphed) too
    func_gradients: bool  # compile and manual --fuse training: gradients from a compiled torch.func.grad_and_value
    copies_batches: bool  # the script copies new batches into static inputs (copy_batch)
    warmup_iters: int
    launcher: str
    process_group: bool  # torch.distributed is initialised (DDP, and Megatron-Core even on one GPU)
    tolerance: Tolerance
    te: TePlan | None
    mcore: McorePlan | None
    sweep: bool
    steps: int
    trace_tags: str  # what `cgkit smoke` passes to `cgkit trace` when the capture fails

    def context(self) -> dict:
        """The template's variables: the plan's fields, by name (nested plans stay objects)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


STAND_IN_LOSS = "stand-in: the mean square of every floating-point output tensor (no --loss given)"


def plan(opts: ScaffoldOptions) -> Plan:
    """Validate ``opts`` and return the typed plan: every decision is made here."""
    wf = workflow(opts.workflow)
    mode = opts.mode or wf.modes[0]
    if mode not in wf.modes:
        raise CgkitError(f"workflow {wf.name!r} has no {mode!r} mode (it has: {', '.join(wf.modes)})")
    for name in opts.given():
        if name not in wf.options:
            takes = ", ".join(option_flag(o) for o in sorted(wf.options)) or "none"
            raise CgkitError(f"workflow {wf.name!r} does not take {option_flag(name)} (it takes: {takes})")
        if mode == "inference" and name in _TRAINING_ONLY:
            raise CgkitError(f"{option_flag(name)} applies to --mode training only")
        if mode == "training" and name in _INFERENCE_ONLY:
            raise CgkitError(f"{option_flag(name)} applies to --mode inference only")
    if not wf.takes_model and (opts.model or opts.inputs or opts.loss):
        raise CgkitError(f"workflow {wf.name!r} builds its own Megatron-Core GPT; it takes no --model, --inputs or --loss")
    if (opts.model is None) != (opts.inputs is None):
        raise CgkitError("--model and --inputs go together: a factory for the model and one for its example inputs")

    training = mode == "training"
    amp = _precision(opts.amp, "--amp")
    dtype = _precision(opts.dtype, "--dtype")
    _check_precision(training, amp, dtype)
    optimizer = opts.optimizer or "adam"
    if optimizer not in OPTIMIZER_CHOICES:
        raise CgkitError(f"--optimizer {optimizer!r}: choose one of {', '.join(OPTIMIZER_CHOICES)}")

    buckets = _parse_buckets(opts.buckets) if opts.buckets else None
    _check_combinations(wf, opts)
    te = _te_plan(wf, opts)
    mcore = _mcore_plan(wf, opts)
    layers = opts.layers or ("model.layers" if te else None)  # TE graphs a model's layers
    model, inputs = _source(opts.model, "--model", opts.output), _source(opts.inputs, "--inputs", opts.output)
    loss = _source(opts.loss, "--loss", opts.output) if opts.loss else None
    sources = (model, inputs, loss)
    return Plan(
        version=__version__,
        command_lines=tuple(_wrap_command(scaffold_command(opts))),
        imports=_imports(wf, sources, bool(opts.ddp), te, mcore),
        workflow=wf.name,
        summary=wf.summary,
        mode=mode,
        training=training,
        captures=wf.captures,
        compiles=wf.compiles,
        # `--emit flags` renders only the Megatron-LM flags and TransformerConfig fields.
        template="_shared/megatron_flags.sh.j2" if mcore and mcore.emit == "flags" else wf.template,
        verify_template=_verify_template(wf, training),
        model=model,
        inputs=inputs,
        loss=loss,
        loss_label=f"--loss {opts.loss}" if opts.loss else STAND_IN_LOSS,
        loaders=tuple(sorted({s.kind for s in sources if s and s.kind in ("file", "local_module")})),
        amp=amp,
        dtype=dtype,
        optimizer=_optimizer_plan(optimizer, wf) if training else None,
        ddp=bool(opts.ddp),
        buckets=tuple(buckets) if buckets else None,
        buckets_literal=repr(tuple(buckets)) if buckets else None,
        layers=_parse_layers(layers) if layers else None,
        fuse=bool(opts.fuse),
        static_io=bool(opts.static_io),
        compile_optimizer=wf.compiles and training and (opts.optimizer_step or "compiled") == "compiled",
        func_gradients=training and _func_gradients(wf, opts),
        copies_batches=bool(opts.static_io) or (wf.copies_inputs and not buckets),
        warmup_iters=wf.warmup_iters_ddp if opts.ddp else 3,
        launcher="torchrun" if opts.ddp else "python",
        process_group=bool(opts.ddp) or mcore is not None,
        tolerance=_tolerance(wf.compiles or bool(opts.fuse), amp or dtype, te, mcore),
        te=te,
        mcore=mcore,
        sweep=bool(te) and model.kind == "demo",
        steps=mcore.graphed_from + 5 if mcore else 6,
        trace_tags=trace_tags(amp.name if amp else "none", optimizer if training and wf.captures else None),
    )


def _func_gradients(wf: Workflow, opts: ScaffoldOptions) -> bool:
    """Whether the training step takes its gradients from a compiled torch.func.grad_and_value.

    The default where it measured faster: compile (it skips the autograd engine between
    cudagraph trees' graphs). manual --fuse replays one graph either way, and its torch.func form
    ran slower kernels on the demo (Inductor's bare mm meets the BLAS choice), so it is opt-in there.
    """
    if wf.compiles:
        return (opts.gradients or "func") == "func"
    return bool(opts.fuse) and opts.gradients == "func"


def _check_combinations(wf: Workflow, opts: ScaffoldOptions) -> None:
    if opts.optimizer_step not in (None, *OPTIMIZER_STEP_CHOICES):
        raise CgkitError(f"--optimizer-step {opts.optimizer_step!r}: choose one of {', '.join(OPTIMIZER_STEP_CHOICES)}")
    if opts.gradients not in (None, *GRADIENTS_CHOICES):
        raise CgkitError(f"--gradients {opts.gradients!r}: choose one of {', '.join(GRADIENTS_CHOICES)}")
    if opts.gradients and not wf.compiles and not opts.fuse:
        raise CgkitError("--gradients chooses how Inductor's compiled step gets its gradients: "
                         "it goes with --fuse in the manual workflow")
    if opts.fuse and (opts.ddp or opts.buckets):
        raise CgkitError("--fuse captures one Inductor-compiled step; it takes no --ddp or --buckets "
                         "(compile the model per bucket yourself, or leave out --fuse)")
    if opts.static_io and (opts.buckets or opts.layers):
        raise CgkitError("--static-io hands you one graph's own inputs and outputs: it takes no --buckets "
                         "or --layers")


def _precision(value: str | None, flag: str) -> Precision | None:
    if value in (None, "none"):
        return None
    if value not in AMP_CHOICES:
        raise CgkitError(f"{flag} {value!r}: choose one of {', '.join(AMP_CHOICES)}")
    return Precision(value, {"bf16": "torch.bfloat16", "fp16": "torch.float16"}[value])


def _check_precision(training: bool, amp: Precision | None, dtype: Precision | None) -> None:
    if amp and dtype:
        raise CgkitError(
            f"--amp {amp.name} and --dtype {dtype.name} together: --dtype casts the parameters and inputs, "
            "--amp autocasts a float32 model's operations; choose one"
        )
    if not training:
        return
    if (amp or dtype) and (amp or dtype).name == "fp16":
        flag = "--amp" if amp else "--dtype"
        raise CgkitError(
            f"{flag} fp16 is for inference here: fp16 training needs GradScaler's dynamic loss scaling, "
            "which cgkit's recipes do not generate (and whose step() with a non-fused optimizer reads on "
            f"the host, which breaks a captured step). Use {flag} bf16 (no loss scaling needed)."
        )


def trace_tags(amp: str, optimizer: str | None) -> str:
    """``key=value`` words for the recipe's tag line: what ``cgkit smoke`` passes to ``cgkit trace``
    besides the recipe's own factories when the capture fails."""
    words = [f"amp={amp}"] if amp != "none" else []
    return " ".join(words + ([f"optimizer={optimizer}"] if optimizer else []))


def render(opts: ScaffoldOptions) -> str:
    """Render the workflow's recipe for ``opts`` and return the script's text."""
    decided = plan(opts)
    template = _environment().get_template(decided.template)
    return _tidy(template.render(**decided.context()))


def write(opts: ScaffoldOptions, output: Path, force: bool = False) -> Path:
    """Render and write to ``output``; refuses to replace an existing file unless ``force``."""
    if output.exists() and not force:
        raise CgkitError(f"{output} already exists; pass --force to overwrite it")
    if output.exists() and output.is_dir():
        raise CgkitError(f"{output} is a directory; give a file name with -o")
    opts.output = output
    text = render(opts)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".cgkit-tmp")
    tmp.write_text(text)
    os.replace(tmp, output)
    return output


def scaffold_command(opts: ScaffoldOptions) -> str:
    """The command line that reproduces this rendering (written into the script's header)."""
    parts = ["cgkit", "scaffold", "--workflow", opts.workflow]
    for name in ("mode", "model", "inputs", *_WORKFLOW_OPTIONS):
        value = getattr(opts, name)
        if value is True:
            parts.append(option_flag(name))
        elif value not in (None, False):
            parts += [option_flag(name), str(value)]
    return shlex.join(parts)


def _wrap_command(command: str, width: int = 88) -> list[str]:
    """Split a command line into lines of at most ``width`` characters, between options."""
    lines, current = [], ""
    for word in _option_groups(shlex.split(command)):
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    return [*lines, current]


def _option_groups(words: list[str]) -> list[str]:
    """Shell-quoted words, with each option kept on one line with its value."""
    groups: list[str] = []
    for word in words:
        if groups and groups[-1].startswith("--") and " " not in groups[-1] and not word.startswith("--"):
            groups[-1] += " " + shlex.quote(word)
        else:
            groups.append(shlex.quote(word))
    return groups


def _imports(wf: Workflow, sources: tuple[Source | None, ...], ddp: bool, te: TePlan | None = None,
             mcore: McorePlan | None = None) -> Imports:
    """The script's import lines, grouped and ordered as isort/ruff expect."""
    kinds = {s.kind for s in sources if s is not None}
    megatron = mcore is not None
    stdlib = ["copy", "dataclasses", "json", "statistics", "sys", "traceback"]  # copy: nested outputs
    stdlib += ["time"] if wf.captures and not megatron else []  # capture_s
    stdlib += ["importlib.util"] if "file" in kinds else []
    stdlib += ["importlib"] if "local_module" in kinds else []
    stdlib += ["logging"] if wf.compiles else []
    stdlib += ["os", "socket"] if ddp or megatron else []
    stdlib += ["inspect"] if te else []
    third = ["torch"] + (["torch.distributed as dist"] if ddp or megatron else [])
    third += ["transformer_engine.pytorch as te"] if te else []
    froms = [("collections.abc", "Mapping, MutableMapping")]
    froms += [("pathlib", "Path")] if kinds & {"file", "local_module"} else []
    froms += [("functools", "partial")] if megatron else []
    third_froms = [("torch.nn.parallel", "DistributedDataParallel")] if ddp else []
    third_froms += [("transformer_engine.common", "recipe")] if te and te.fp8 else []
    third_froms += list(mcore.imports) if mcore else []
    user_froms = []  # the user's own modules: a first-party section of their own
    for alias, source in zip(("build_model", "build_inputs", "loss_fn"), sources, strict=True):
        if source and source.kind == "module":
            name = source.name if source.name == alias else f"{source.name} as {alias}"
            user_froms.append((source.module, name))
    return Imports(
        stdlib=tuple([f"import {m}" for m in sorted(stdlib)] + [f"from {m} import {n}" for m, n in sorted(froms)]),
        third_party=tuple([f"import {m}" for m in sorted(third)]
                          + [f"from {m} import {n}" for m, n in sorted(third_froms)]),
        first_party=tuple(f"from {m} import {n}" for m, n in sorted(user_froms)),
    )


def _environment():
    import jinja2  # only to render: `cgkit check` and the other commands start without it

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(recipes_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


_SECTION = "# --- "
_SECTION_WIDTH = 100


def _tidy(text: str) -> str:
    """Even out what conditional blocks leave behind.

    Blank-line runs are cut to two; a ``# --- Section`` comment is padded to a fixed width and
    sits directly on the code it introduces.
    """
    lines: list[str] = []
    blank = 0
    for line in text.splitlines():
        line = line.rstrip()
        if not line:
            blank += 1
            if blank > 2 or (lines and lines[-1].startswith(_SECTION)):
                continue
        else:
            blank = 0
            if line.startswith(_SECTION):
                title = line[len(_SECTION):].rstrip("- ")
                line = f"{_SECTION}{title} ".ljust(_SECTION_WIDTH, "-")
        lines.append(line)
    return "\n".join(lines).strip("\n") + "\n"


def _source(text: str | None, role: str, output: Path | None) -> Source:
    """How the script gets a user factory: imported from a module, loaded from a file, or the demo."""
    if text is None:
        return Source("demo")
    ref: Ref = parse_ref(text, role)
    if ref.module is not None and ref.local_root is None:
        return Source("module", name=ref.name, module=ref.module)
    if ref.module is not None:
        # Found in the current folder only: the script puts that folder on sys.path itself.
        return Source("local_module", name=ref.name, module=ref.module, root=_portable_path(ref.local_root, output))
    return Source("file", name=ref.name, path=_portable_path(ref.path, output))


def _portable_path(path: Path, output: Path | None) -> str:
    """``path`` relative to the script's folder when the script is written to a file (so the two
    can move together), else absolute. The script resolves it with ``resolve_path``."""
    if output is None:
        return str(path)
    return Path(os.path.relpath(path, output.resolve().parent)).as_posix()


def _verify_template(wf: Workflow, training: bool) -> str:
    if not wf.captures:
        return "_shared/verify_profile.py.j2"
    if wf.family == "megatron":
        return "_shared/verify_megatron.py.j2"
    return "_shared/verify_training.py.j2" if training else "_shared/verify_inference.py.j2"


def _optimizer_plan(name: str, wf: Workflow) -> OptimizerPlan:
    """The optimizer line and the comments that say why, for the workflow at hand."""
    cls, base = {"sgd": ("torch.optim.SGD", "momentum=0.9"), "adam": ("torch.optim.Adam", ""),
                 "adamw": ("torch.optim.AdamW", "weight_decay=0.01")}[name]
    if not wf.captures:  # the user's eager step as it is: nothing graph-specific
        return OptimizerPlan(name, cls, "LEARNING_RATE", base, ())
    why = ["The learning rate lives in a device tensor: a schedule updates it in place between steps."]
    extra = "fused=True" if name == "sgd" else "capturable=True"
    if wf.captures_optimizer:
        why.append("A Python float would be baked into the captured step.")
        if name == "sgd":
            why.append("fused=True: the foreach SGD turns a tensor lr into a Python number (a sync).")
        else:
            why.append("capturable=True keeps the step counters on the GPU, so step() can be captured.")
    else:
        # The optimizer runs eagerly here; the settings match the manual recipe's, so the
        # comparisons across workflows train the same way.
        why.append(f"{extra} as in the manual recipe, so every workflow trains the same way (here")
        why.append("step() runs eagerly, outside the graphs).")
    return OptimizerPlan(name, cls, "lr", ", ".join(part for part in (base, extra) if part), tuple(why))


def _parse_buckets(text: str) -> list[int]:
    try:
        sizes = sorted({int(part) for part in text.split(",") if part.strip()}, reverse=True)
    except ValueError:
        raise CgkitError(f"--buckets {text!r}: expected comma-separated batch sizes, like 1,2,4,8") from None
    if not sizes or sizes[-1] < 1:
        raise CgkitError(f"--buckets {text!r}: batch sizes must be positive integers")
    return sizes  # largest first: that is the capture order


def _parse_layers(text: str) -> str:
    parts = text.split(".")
    if parts[0] != "model" or not all(p.isidentifier() for p in parts):
        raise CgkitError(
            f"--layers {text!r}: name the layers as an attribute path from the model, "
            "like model.blocks (or model, when the model is an nn.Sequential)"
        )
    return text


def _positive_int(value: object, flag: str) -> int:
    try:
        number = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        number = 0
    if number < 1 or str(number) != str(value).strip():
        raise CgkitError(f"{flag} {value!r}: expected a positive integer")
    return number


# --- Transformer Engine and Megatron-Core ---------------------------------------------------------

# FP8 recipe classes of transformer_engine.common.recipe, with the arguments the `te` recipe passes
# (tests/test_recipes_te_mcore.py checks every keyword against TE's source).
_FP8_RECIPES = {
    "delayed": ("DelayedScaling", "fp8_format=recipe.Format.HYBRID, amax_history_len=16"),
    "current": ("Float8CurrentScaling", "fp8_format=recipe.Format.HYBRID"),
    "block": ("Float8BlockScaling", ""),
    "mxfp8": ("MXFP8BlockScaling", ""),
}

_MEGATRON_IMPORTS = [
    ("megatron.core", "parallel_state"),
    ("megatron.core.distributed", "DistributedDataParallel, DistributedDataParallelConfig"),
    ("megatron.core.models.gpt", "GPTModel"),
    ("megatron.core.pipeline_parallel", "get_forward_backward_func"),
    ("megatron.core.tensor_parallel.random", "model_parallel_cuda_manual_seed"),
    ("megatron.core.transformer.module", "Float16Module"),
    ("megatron.core.transformer.transformer_config", "TransformerConfig"),
]


def _te_plan(wf: Workflow, opts: ScaffoldOptions) -> TePlan | None:
    """What the `te` recipe renders: the FP8 recipe, and the microbatch schedule if asked."""
    if wf.family != "te":
        return None
    fp8 = str(opts.fp8 or "none")
    if fp8 not in FP8_CHOICES:
        raise CgkitError(f"--fp8 {fp8!r}: choose one of {', '.join(FP8_CHOICES)}")
    microbatches = _positive_int(opts.microbatches or 1, "--microbatches")
    if microbatches > 1 and opts.model is not None:
        raise CgkitError(
            "--microbatches runs cgkit's demo TE layers as one pipeline stage (TE's `_order` schedule "
            "calls each layer's graph directly, not your model's forward); leave it out with --model"
        )
    cls, kwargs = _FP8_RECIPES.get(fp8, (None, None))
    return TePlan(
        fp8=Fp8Plan(fp8, cls, kwargs) if cls else None,
        microbatches=microbatches,
        cache_weights=cls is not None and microbatches > 1,
    )


def _mcore_plan(wf: Workflow, opts: ScaffoldOptions) -> McorePlan | None:
    """Megatron-Core settings, and the Megatron-LM flags that turn the same thing on."""
    if wf.family != "megatron":
        return None
    impl = wf.mcore_impl or str(opts.impl or "local")
    if impl not in MCORE_IMPLS and impl != wf.mcore_impl:
        raise CgkitError(f"--impl {impl!r}: choose one of {', '.join(MCORE_IMPLS)}")
    emit = str(opts.emit or "script")
    if emit not in EMIT_CHOICES:
        raise CgkitError(f"--emit {emit!r}: choose one of {', '.join(EMIT_CHOICES)}")
    warmup_steps = 3  # Megatron's default for --cuda-graph-warmup-steps
    te_impl = impl == "transformer_engine"
    flags = [f"--cuda-graph-impl {impl}", f"--cuda-graph-warmup-steps {warmup_steps}"]
    if impl == "full_iteration":
        flags.append("--no-check-for-nan-in-loss-and-grad")  # validate_args asserts it
    flags.append("--te-rng-tracker")  # validate_args turns it on (with a warning) for TE layers
    config = {
        "cuda_graph_impl": repr(impl),
        "cuda_graph_modules": "[]",
        "cuda_graph_warmup_steps": str(warmup_steps),
        "use_te_rng_tracker": str(te_impl),
    }
    spec = "get_gpt_layer_with_transformer_engine_spec" if te_impl else "get_gpt_layer_local_spec"
    imports = [*_MEGATRON_IMPORTS, ("megatron.core.models.gpt.gpt_layer_specs", spec)]
    if impl == "full_iteration":
        imports.append(("megatron.core.full_cuda_graph", "FullCudaGraphWrapper, get_shared_capture_stream"))
    elif te_impl:
        imports += [("megatron.core.num_microbatches_calculator", "init_num_microbatches_calculator"),
                    ("megatron.core.transformer.cuda_graphs", "TECudaGraphHelper")]
    else:
        imports.append(("megatron.core.transformer.cuda_graphs", "CudaGraphManager"))
    return McorePlan(
        impl=impl,
        emit=emit,
        microbatches=_positive_int(opts.microbatches or 1, "--microbatches"),
        warmup_steps=warmup_steps,
        te_impl=te_impl,
        spec=spec,
        flags=tuple(flags),
        config=config,
        imports=tuple(imports),
        # Steps run eagerly before the graphs replay: local records in step 1 and captures at its
        # end; transformer_engine and full_iteration capture after `warmup_steps` eager steps.
        graphed_from=1 if impl == "local" else warmup_steps,
    )


def _tolerance(inductor: bool, precision: Precision | None, te: TePlan | None, mcore: McorePlan | None) -> Tolerance:
    """How close graphed must be to eager, and why (``inductor``: the graph runs Inductor's kernels)."""
    if te and te.fp8:
        return Tolerance("5e-2", "5e-2", "1e-1", "FP8 GEMMs; each model keeps its own amax history, so scales differ slightly")
    if te or mcore:
        return Tolerance("2e-2", "2e-2", "1e-1", "bf16 parameters")
    if precision:
        return Tolerance("2e-2", "2e-2", "1e-1", f"{precision.name} arithmetic")
    if inductor:
        # Measured on an H200 (torch 2.11, TF32 on): 7e-4 on outputs, 3e-3 on parameters after
        # 9 Adam steps, whose normalised update turns rounding-level gradient differences into
        # parameter differences of up to the learning rate per step.
        return Tolerance("1e-2", "1e-2", "1e-1", "inductor fuses and reorders: not the eager kernels, so rounding differs")
    return Tolerance("1e-4", "1e-4", "1e-3", "graph replay runs the same kernels as eager: differences are rounding at most")
