"""The workflow registry and the renderer behind ``cgkit scaffold``.

Python decides, templates render: :func:`plan` validates the options and turns them into a
plain context (every choice already made), and :func:`render` fills the workflow's Jinja
template with it. Templates use ``StrictUndefined``, so a missing value is an error, not a blank.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field, fields
from pathlib import Path

import jinja2

from cgkit import __version__
from cgkit.bundle import recipes_dir
from cgkit.errors import CgkitError
from cgkit.refs import Ref, parse_ref

MODES = ("inference", "training")
AMP_CHOICES = ("none", "bf16", "fp16")
OPTIMIZER_CHOICES = ("sgd", "adam", "adamw")


@dataclass(frozen=True)
class Workflow:
    """One way of applying CUDA graphs, rendered from ``recipes/<template>``."""

    name: str
    summary: str
    template: str
    modes: tuple[str, ...]
    # Scaffold options this workflow takes beyond --mode/--model/--inputs; others are rejected.
    options: frozenset[str]
    captures: bool = True  # False for `profile`, which measures but captures nothing


WORKFLOWS: dict[str, Workflow] = {
    wf.name: wf
    for wf in (
        Workflow(
            name="profile",
            summary="Profile the eager step with torch.profiler and estimate what a graph can gain.",
            template="profile.py.j2",
            modes=("inference", "training"),
            options=frozenset({"loss", "amp", "optimizer"}),
            captures=False,
        ),
        Workflow(
            name="compile",
            summary='torch.compile(mode="reduce-overhead"): CUDA graphs through cudagraph trees.',
            template="compile.py.j2",
            modes=("inference", "training"),
            options=frozenset({"loss", "amp", "optimizer"}),
        ),
        Workflow(
            name="callables",
            summary="torch.cuda.make_graphed_callables: graph forward and backward, optimizer stays eager.",
            template="callables.py.j2",
            modes=("training", "inference"),
            options=frozenset({"loss", "amp", "optimizer", "layers", "ddp"}),
        ),
        Workflow(
            name="manual",
            summary="torch.cuda.graph: capture the whole step yourself (inference, full training step, buckets, DDP).",
            template="manual.py.j2",
            modes=("inference", "training"),
            options=frozenset({"loss", "amp", "optimizer", "buckets", "ddp"}),
        ),
    )
}

# Options that only make sense in one mode.
_TRAINING_ONLY = ("loss", "optimizer", "ddp")
_INFERENCE_ONLY = ("buckets",)


@dataclass
class ScaffoldOptions:
    """What the user asked for. ``None`` means "not given" (so it can be told from a default)."""

    workflow: str
    mode: str | None = None
    model: str | None = None
    inputs: str | None = None
    loss: str | None = None
    amp: str | None = None
    optimizer: str | None = None
    ddp: bool = False
    buckets: str | None = None
    layers: str | None = None
    # Where the rendered script will be written (file references are made relative to it).
    output: Path | None = None
    extra: dict[str, object] = field(default_factory=dict)

    def given(self) -> list[str]:
        """Names of the workflow-specific options the user set."""
        skip = {"workflow", "mode", "model", "inputs", "output", "extra"}
        names = [f.name for f in fields(self) if f.name not in skip and getattr(self, f.name) not in (None, False)]
        return names + sorted(self.extra)


def option_flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def workflow(name: str) -> Workflow:
    try:
        return WORKFLOWS[name]
    except KeyError:
        raise CgkitError(f"unknown workflow {name!r}; choose one of: {', '.join(WORKFLOWS)}") from None


def plan(opts: ScaffoldOptions) -> dict:
    """Validate ``opts`` and return the template context: every decision is made here."""
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
    if (opts.model is None) != (opts.inputs is None):
        raise CgkitError("--model and --inputs go together: a factory for the model and one for its example inputs")

    amp = opts.amp or "none"
    if amp not in AMP_CHOICES:
        raise CgkitError(f"--amp {amp!r}: choose one of {', '.join(AMP_CHOICES)}")
    optimizer = opts.optimizer or "adam"
    if optimizer not in OPTIMIZER_CHOICES:
        raise CgkitError(f"--optimizer {optimizer!r}: choose one of {', '.join(OPTIMIZER_CHOICES)}")
    training = mode == "training"
    if wf.name == "manual" and training and amp == "fp16":
        raise CgkitError(
            "--amp fp16 with a fully captured training step is not supported: fp16 needs GradScaler, "
            "whose step() reads found-inf on the CPU (a sync that breaks capture). Use --amp bf16, "
            "or --workflow callables, which keeps the optimizer (and GradScaler) eager."
        )
    elif training and amp == "fp16":
        raise CgkitError(
            "--amp fp16 is for inference here: fp16 training needs GradScaler's dynamic loss scaling, "
            "which cgkit's recipes do not generate. Use --amp bf16 (no loss scaling needed)."
        )

    buckets = _parse_buckets(opts.buckets) if opts.buckets else None
    sources = {
        "model": _source(opts.model, "--model", opts.output),
        "inputs": _source(opts.inputs, "--inputs", opts.output),
        "loss": _source(opts.loss, "--loss", opts.output) if opts.loss else None,
    }
    return {
        "version": __version__,
        "command_lines": _wrap_command(scaffold_command(opts)),
        "imports": _imports(wf, sources, bool(opts.ddp)),
        "workflow": wf.name,
        "summary": wf.summary,
        "mode": mode,
        "training": training,
        "captures": wf.captures,
        "verify_template": _verify_template(wf, training),
        **sources,
        "uses_file_refs": any(s is not None and s["kind"] == "file" for s in sources.values()),
        "refs_relative": opts.output is not None,
        "amp": _amp_context(amp),
        "optimizer": _optimizer_context(optimizer) if training else None,
        "ddp": bool(opts.ddp),
        "buckets": buckets,
        "buckets_literal": repr(tuple(buckets)) if buckets else None,
        "layers": _parse_layers(opts.layers) if opts.layers else None,
        # PyTorch documents 11 eager warm-up iterations before capturing a DDP model; the
        # callables recipe graphs before wrapping in DDP, so 3 is enough there.
        "warmup_iters": 11 if opts.ddp and wf.name == "manual" else 3,
        "launcher": "torchrun" if opts.ddp else "python",
        **opts.extra,
    }


def render(opts: ScaffoldOptions) -> str:
    """Render the workflow's recipe for ``opts`` and return the script's text."""
    context = plan(opts)
    template = _environment().get_template(workflow(opts.workflow).template)
    text = template.render(**context)
    return _tidy(text)


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
    if opts.mode:
        parts += ["--mode", opts.mode]
    for name in ("model", "inputs", "loss", "amp", "optimizer", "buckets", "layers"):
        value = getattr(opts, name)
        if value is not None:
            parts += [option_flag(name), str(value)]
    if opts.ddp:
        parts.append("--ddp")
    for name, value in sorted(opts.extra.items()):
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


def _imports(wf: Workflow, sources: dict, ddp: bool) -> dict[str, list[str]]:
    """The script's import lines, grouped and ordered as isort/ruff expect."""
    file_refs = any(s is not None and s["kind"] == "file" for s in sources.values())
    stdlib = ["json", "statistics", "sys", "traceback"]
    stdlib += ["copy"] if wf.captures else []
    stdlib += ["importlib.util"] if file_refs else []
    stdlib += ["logging"] if wf.name == "compile" else []
    stdlib += ["os"] if ddp else []
    third = ["torch"] + (["torch.distributed as dist"] if ddp else [])
    froms = [("pathlib", "Path")] if file_refs else []
    third_froms = [("torch.nn.parallel", "DistributedDataParallel")] if ddp else []
    user_froms = []  # the user's own modules: a first-party section of their own
    for alias, source in (("build_model", sources["model"]), ("build_inputs", sources["inputs"]),
                          ("loss_fn", sources["loss"])):
        if source and source["kind"] == "module":
            name = source["name"] if source["name"] == alias else f"{source['name']} as {alias}"
            user_froms.append((source["module"], name))
    return {
        "stdlib": [f"import {m}" for m in sorted(stdlib)] + [f"from {m} import {n}" for m, n in sorted(froms)],
        "third_party": [f"import {m}" for m in sorted(third)]
        + [f"from {m} import {n}" for m, n in sorted(third_froms)],
        "first_party": [f"from {m} import {n}" for m, n in sorted(user_froms)],
    }


def _environment() -> jinja2.Environment:
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


def _source(text: str | None, role: str, output: Path | None) -> dict | None:
    """How the script gets a user factory: imported from a module, loaded from a file, or the demo."""
    if text is None:
        return {"kind": "demo"}
    ref: Ref = parse_ref(text, role)
    if ref.module is not None:
        return {"kind": "module", "module": ref.module, "name": ref.name, "text": ref.text}
    if output is not None:
        # Keep the script portable with its folder: the path is relative to the script itself.
        path = Path(os.path.relpath(ref.path, output.resolve().parent)).as_posix()
        return {"kind": "file", "path": path, "relative": True, "name": ref.name, "text": ref.text}
    return {"kind": "file", "path": str(ref.path), "relative": False, "name": ref.name, "text": ref.text}


def _verify_template(wf: Workflow, training: bool) -> str:
    if not wf.captures:
        return "_shared/verify_profile.py.j2"
    return "_shared/verify_training.py.j2" if training else "_shared/verify_inference.py.j2"


def _amp_context(amp: str) -> dict | None:
    if amp == "none":
        return None
    return {"name": amp, "dtype": {"bf16": "torch.bfloat16", "fp16": "torch.float16"}[amp]}


def _optimizer_context(name: str) -> dict:
    # The learning rate lives in a device tensor so a schedule can change it between replays
    # (a Python float would be baked into the graph). Adam/AdamW need capturable=True to keep
    # their step counters on the GPU when step() is captured.
    return {
        "sgd": {"name": "sgd", "cls": "torch.optim.SGD", "kwargs": "momentum=0.9"},
        "adam": {"name": "adam", "cls": "torch.optim.Adam", "kwargs": "capturable=True"},
        "adamw": {"name": "adamw", "cls": "torch.optim.AdamW", "kwargs": "weight_decay=0.01, capturable=True"},
    }[name]


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
