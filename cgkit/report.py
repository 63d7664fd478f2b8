"""The report a recipe prints (one JSON object per run), defined once.

:class:`RecipeReport` is the definition: each field's name, JSON kind, meaning, whether every
report has it, and which runs write it. Recipes write the JSON (tests render every template and
check each key written against these fields, and that every required one is written); ``cgkit
smoke``, ``--compare`` and ``benchmarks/write_results.py`` read it through
:meth:`RecipeReport.from_json`; ``references/report.md`` is generated from it::

    python -m cgkit.report > references/report.md

Torch-free, like everything ``cgkit smoke`` imports.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields

# JSON kinds and the Python types a value of that kind may have (None is always allowed: not measured).
KINDS: dict[str, tuple[type, ...]] = {
    "bool": (bool,),
    "int": (int,),
    "number": (int, float),
    "string": (str,),
    "list": (list,),
    "object": (dict,),
}


def _field(kind: str, meaning: str, written_by: str = "every recipe", required: bool = False):
    return field(default=None, metadata={"kind": kind, "meaning": meaning, "written_by": written_by,
                                         "required": required})


@dataclass
class RecipeReport:
    """One run of a recipe, as its JSON report says (a field is None where the run did not write it)."""

    # Written by every recipe at the start, then updated.
    workflow: str | None = _field("string", "The workflow of the recipe (manual, callables, compile, ...).",
                                  required=True)
    mode: str | None = _field("string", "inference or training.", required=True)
    captured: bool | None = _field("bool", "The step was captured and its graph replayed (profile: false).",
                                   required=True)
    correct: bool | None = _field("bool", "Graphed results matched eager within the recipe's tolerance.",
                                  required=True)
    max_abs_diff: float | None = _field(
        "number", "Largest |graphed - eager| over the compared outputs, losses and parameters.", required=True)
    eager_ms: float | None = _field("number", "Eager milliseconds per step (median, CUDA events).", required=True)
    graphed_ms: float | None = _field(
        "number", "Graphed milliseconds per step, with the recipe's copies in and out.", required=True)
    speedup: float | None = _field("number", "eager_ms / graphed_ms, both timed in this process.", required=True)
    graph_memory_mb: float | None = _field(
        "number", "GPU memory the capture added, in MB (reserved memory after empty_cache).", required=True)
    replays_checked: int | None = _field("int", "Graphed calls compared with eager.", required=True)
    error: str | None = _field("string", "Why the run failed; null when it passed.", required=True)
    stage: str | None = _field(
        "string", "What the recipe was doing last: setup, capture, replay, timing, profile or sweep.",
        required=True)
    torch: str | None = _field("string", "torch.__version__ where the recipe ran.", required=True)

    # Written when it applies.
    gpu: str | None = _field("string", "The CUDA device's name.")
    traceback: str | None = _field("string", "The last frames of the exception behind `error`.")
    usage_error: bool | None = _field(
        "bool", "The error asks for a change of options or factories, not of the capture (smoke exits 2).")
    loss: str | None = _field("string", "The training loss: the --loss reference, or the stand-in.",
                              "training recipes, profile")
    output_leaves: list | None = _field(
        "list", 'The path of every value in the model\'s output, e.g. output["logits"], output.hidden[0].',
        "inference recipes")
    mismatches: list | None = _field(
        "list", "Up to 10 output values that differed from eager: input number, path, and how. A value "
                "that is not a tensor and differs was frozen at capture.", "inference recipes")
    capture_s: float | None = _field(
        "number", "Seconds to make the graph: warm-up (with compilation, for compile and --fuse) and capture.",
        "every capturing recipe but Megatron-Core's")
    replay_only_ms: float | None = _field("number", "The graph alone, without the copies in and out.",
                                          "inference recipes")
    graph_launches_per_step: float | None = _field(
        "number", "CUDA graph launches per graphed step, read from the profiler: replay happened.")
    cudagraph_skips: int | None = _field("int", 'Inductor\'s "skipping cudagraphs" messages.', "compile")
    cudagraph_skip_reasons: list | None = _field("list", "The distinct reasons of those messages.", "compile")
    kernel_floor_ms: float | None = _field(
        "number", "Summed GPU time of eager's kernels per step: the floor a replay can approach.")
    kernels_per_step: float | None = _field("number", "Kernels per eager step.")
    graphed_over_floor: float | None = _field("number", "graphed_ms / kernel_floor_ms.")
    graphed_kernel_ms: float | None = _field(
        "number", "Summed GPU time of the graphed step's own kernels (torch.compile picks its own).")
    dropout_layers_disabled: int | None = _field(
        "int", "Dropout layers switched off so that graphed and eager runs can be compared.", "training recipes")
    losses_eager: list | None = _field("list", "Per-step eager losses of the compared steps.", "training recipes")
    losses_graphed: list | None = _field("list", "Per-step graphed losses of the same steps.", "training recipes")
    update_rel_error: float | None = _field(
        "number", "|graphed update - eager update| / |eager update| over all parameters.", "training recipes")
    world_size: int | None = _field("int", "Processes in the DDP group.", "--ddp")
    ranks_agree: bool | None = _field("bool", "Every rank holds bit-identical parameters after training.", "--ddp")
    per_rank: list | None = _field("list", "Each rank's eager_ms, graphed_ms and kernel_floor_ms.", "--ddp")
    graphed_from_step: int | None = _field("int", "The first step that replays graphs.", "mcore-layer, mcore-full")
    sweep: list | None = _field("list", "Layer sizes timed eager and graphed.", "te on its demo layers")
    graphs_pay_up_to: dict | None = _field("object", "The largest swept size where the graph still pays.",
                                           "te on its demo layers")
    gpu_idle_fraction: float | None = _field("number", "Share of the eager step the GPU sits idle.", "profile")
    speedup_bound: float | None = _field("number", "Eager time over its kernel floor: the most a graph can gain.",
                                         "profile")
    advice: str | None = _field("string", "What the profile says about graphing this step.", "profile")

    # Keys this definition does not know (a recipe from another cgkit version): kept, never read.
    unknown: dict = field(default_factory=dict, metadata={"internal": True})

    @classmethod
    def from_json(cls, data: dict) -> RecipeReport:
        """Read a report, checking each known field's kind; raises ValueError on a wrong kind."""
        known = {f.name: f for f in schema()}
        values = {}
        for name, value in data.items():
            spec = known.get(name)
            if spec is None:
                continue
            if value is not None and not _is_kind(value, spec.metadata["kind"]):
                raise ValueError(f"report field {name!r} should be {spec.metadata['kind']}, got {value!r}")
            values[name] = value
        return cls(**values, unknown={k: v for k, v in data.items() if k not in known})

    def as_json(self) -> dict:
        """The report as the recipe printed it (unknown keys included)."""
        data = {f.name: getattr(self, f.name) for f in schema() if getattr(self, f.name) is not None
                or f.metadata["required"]}
        return {**data, **self.unknown}

    @property
    def passed(self) -> bool:
        if self.workflow == "profile":
            return self.error is None
        return bool(self.captured and self.correct)


def schema() -> list:
    """The report's fields (dataclass fields with their metadata), in the order reports list them."""
    return [f for f in fields(RecipeReport) if not f.metadata.get("internal")]


def required_fields() -> list[str]:
    return [f.name for f in schema() if f.metadata["required"]]


def _is_kind(value: object, kind: str) -> bool:
    if kind in ("int", "number") and isinstance(value, bool):
        return False
    return isinstance(value, KINDS[kind])


def render_report_md() -> str:
    """references/report.md: every field of a recipe's report."""
    lines = [
        "# The report a recipe prints",
        "",
        "<!-- Generated from cgkit/report.py by `python -m cgkit.report > references/report.md`. "
        "Do not edit by hand. -->",
        "",
        "Every recipe that `cgkit scaffold` writes ends by printing one JSON object: its report. "
        "`cgkit smoke --json` prints the same object with `verdict`, `returncode` and, when the run "
        "failed, `diagnosis` and `located` added. Fields marked required are in every report (null "
        "where not measured); the others appear when the run writes them.",
        "",
        "| field | kind | required | written by | meaning |",
        "|---|---|---|---|---|",
    ]
    for f in schema():
        meta = f.metadata
        lines.append(f"| `{f.name}` | {meta['kind']} | {'yes' if meta['required'] else ''} "
                     f"| {meta['written_by']} | {meta['meaning']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render_report_md())
