"""Run a generated recipe on the GPU and read its report: captured, correct, faster, at what cost.

The recipe runs in a child process (plain ``python``, or ``torchrun`` for DDP recipes); this
module never imports torch itself. A recipe prints one JSON line as its report; :func:`run_recipe`
finds it, and :func:`explain_failure` turns an error into a cause and a fix.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from cgkit import recipes
from cgkit.bundle import reference
from cgkit.errors import CgkitError
from cgkit.report import RecipeReport

PASSED, FAILED = "passed", "failed"
_RECIPE_TAG = re.compile(r"^# cgkit-recipe: (.*)$", re.MULTILINE)
# The compared approaches, in the order of the table; the eager row is the manual recipe's eager time.
COMPARED_WORKFLOWS = ("compile", "callables", "manual")
# The compared approaches: a label, its workflow, and the options that make it that approach.
COMPARED_APPROACHES = (("compile", "compile", {}), ("callables", "callables", {}), ("manual", "manual", {}),
                       ("manual --fuse", "manual", {"fuse": True}))


class NoGPU(CgkitError):
    """No CUDA device (or no torch) where the recipe would run: smoke exits with status 2."""


@dataclass
class Located:
    """What ``cgkit trace`` found on the step that failed: findings (its JSON), or why it found none."""

    findings: list[dict] = field(default_factory=list)
    error: str | None = None

    def as_dict(self) -> dict:
        return {"findings": self.findings, "error": self.error}


@dataclass
class SmokeResult:
    path: Path
    report: RecipeReport | None
    returncode: int
    output_tail: str = ""
    diagnoses: list = field(default_factory=list)
    located: Located | None = None  # the failure traced to lines (see locate_failure)

    @property
    def verdict(self) -> str:
        return PASSED if self.report is not None and self.report.passed else FAILED

    @property
    def usage_error(self) -> bool:
        """The recipe stopped on something the user must change (an option, a factory): exit 2."""
        return bool(self.report and self.report.usage_error)

    def as_dict(self) -> dict:
        data = (self.report.as_json() if self.report is not None
                else {"error": "the recipe printed no report", "output_tail": self.output_tail})
        data["verdict"] = self.verdict
        data["returncode"] = self.returncode
        if self.diagnoses:
            data["diagnosis"] = [
                {"id": d.id, "title": d.title, "cause": d.cause, "fix": d.fix, "reference": d.reference}
                for d in self.diagnoses
            ]
        if self.located is not None:
            data["located"] = self.located.as_dict()
        return data


def recipe_tags(path: Path) -> dict[str, str]:
    """The ``# cgkit-recipe: key=value ...`` line a rendered recipe carries (empty if none)."""
    try:
        match = _RECIPE_TAG.search(path.read_text(errors="replace")[:20000])
    except OSError as exc:
        raise CgkitError(f"cannot read {path}: {exc}") from None
    if not match:
        return {}
    try:
        words = shlex.split(match.group(1))
    except ValueError:
        words = match.group(1).split()
    return dict(item.split("=", 1) for item in words if "=" in item)


def require_gpu(python: str = sys.executable) -> str:
    """Check that the recipe's interpreter has torch and sees a CUDA device; return the GPU name."""
    probe = "import json, torch; print(json.dumps([torch.cuda.is_available(), torch.__version__]))"
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NoGPU(f"could not start {python} to look for a GPU: {exc}") from None
    if done.returncode != 0:
        if "No module named 'torch'" in done.stderr:
            raise NoGPU(f"torch is not installed for {python}; cgkit smoke runs recipes on a CUDA GPU "
                        '(install it with pip install -e ".[torch]" in a cgkit checkout, or from pytorch.org)')
        raise NoGPU(f"importing torch failed: {done.stderr.strip().splitlines()[-1:]}")
    available, version = json.loads(done.stdout.strip().splitlines()[-1])
    if not available:
        raise NoGPU(
            f"no CUDA device is visible (torch {version}); cgkit smoke needs an NVIDIA GPU. "
            "`cgkit scaffold` and `cgkit check` work without one."
        )
    return version


def launch_command(path: Path, nproc: int | None, python: str = sys.executable) -> list[str]:
    """``python FILE``, or torchrun for recipes tagged ``launcher=torchrun``."""
    if recipe_tags(path).get("launcher") == "torchrun":
        return [python, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc or 1}", str(path)]
    if nproc:
        raise CgkitError(f"--nproc is for DDP recipes (scaffolded with --ddp); {path.name} runs as one process")
    return [python, str(path)]


def run_recipe(path: Path, timeout: float = 900, nproc: int | None = None, python: str = sys.executable,
               needs_gpu: bool = True, locate: bool = True) -> SmokeResult:
    """Run one recipe and collect its report. Raises :class:`NoGPU` when there is no GPU.

    When it fails (no capture, or a replay that differs from eager) and ``locate`` is on, the same
    step is traced (:func:`locate_failure`) so the report names the lines to fix."""
    path = Path(path)
    if not path.is_file():
        raise CgkitError(f"no such recipe file: {path}")
    if needs_gpu:
        require_gpu(python)
    command = launch_command(path, nproc, python)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # A session of its own, so a timeout stops torchrun's workers too, not only the launcher.
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             start_new_session=True)
    try:
        stdout, stderr = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        stdout, stderr = child.communicate()
        result = SmokeResult(path, None, 124, _tail(stdout + stderr))
        result.report = RecipeReport(workflow=recipe_tags(path).get("workflow"), captured=False, correct=False,
                                     error=f"timed out after {timeout:g} s")
        return result
    report = find_report(stdout)
    result = SmokeResult(path, report, child.returncode, _tail(stdout + stderr))
    if result.verdict == FAILED:
        result.diagnoses = explain_failure(report, result.output_tail)
        if locate and report is not None and report.workflow != "profile" and not report.usage_error:
            result.located = locate_failure(path, python=python)
    return result


# Recipes whose step `cgkit trace` cannot build from the recipe's factories: Megatron-Core builds
# its own GPT and schedule; TE graphs layers one by one.
_UNTRACEABLE = ("te", "mcore-layer", "mcore-full")


def trace_command(path: Path, python: str = sys.executable) -> list[str] | None:
    """``cgkit trace`` on the step a recipe captures, built by the recipe's own factories
    (``build_model``, ``build_inputs``, ``loss_fn``), with its mode and options from the tag line.
    None for files that are no cgkit recipe, and for the TE and Megatron-Core recipes."""
    tags = recipe_tags(path)
    if "workflow" not in tags or tags["workflow"] in _UNTRACEABLE:
        return None
    mode = tags.get("mode", "inference")
    recipe = str(path.resolve())
    command = [python, "-m", "cgkit", "trace", "--format", "json", "--workflow", tags["workflow"], "--mode", mode,
               "--model", f"{recipe}:build_model", "--inputs", f"{recipe}:build_inputs"]
    if mode == "training":
        command += ["--loss", f"{recipe}:loss_fn"]
    for key in ("amp", "optimizer"):
        if key in tags:
            command += [f"--{key}", tags[key]]
    return command


TRACE_TIMEOUT = 600.0


def locate_failure(path: Path, python: str = sys.executable, timeout: float = TRACE_TIMEOUT) -> Located | None:
    """Run ``cgkit trace`` on the step of a recipe that failed: the lines (user, library) that a graph
    cannot hold. None when the recipe's step cannot be traced (the demo model, TE, Megatron-Core)."""
    command = trace_command(path, python)
    if command is None:
        return None
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Located(error=f"cgkit trace did not finish in {timeout:g} s")
    except OSError as exc:
        return Located(error=f"could not run cgkit trace: {exc}")
    try:
        data = json.loads(done.stdout)
    except ValueError:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return Located(error=lines[-1] if lines else f"cgkit trace exited with status {done.returncode}")
    errors = data.get("errors") or []
    return Located(findings=data.get("findings", []), error="; ".join(errors) or None)


def find_report(stdout: str) -> RecipeReport | None:
    """The last stdout line that is a JSON object with a ``workflow`` key, read as a report."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and "workflow" in data:
                try:
                    return RecipeReport.from_json(data)
                except ValueError:
                    continue
    return None


def explain_failure(report: RecipeReport | None, output_tail: str) -> list:
    """Cause and fix for a failed run, from the same knowledge base as ``cgkit explain``."""
    from cgkit import explain

    if report is not None and report.usage_error:
        return []  # the error says what to change; no capture problem to diagnose
    parts = [report.error, report.traceback] if report is not None else []
    text = "\n".join(filter(None, [*parts, output_tail]))
    return explain.diagnose(text) if text else []


def run_workflow(opts: recipes.ScaffoldOptions, timeout: float = 900, nproc: int | None = None,
                 folder: Path | None = None, locate: bool = True) -> SmokeResult:
    """Render a workflow to a file (in ``folder``, or a temporary one) and run it."""
    with tempfile.TemporaryDirectory(prefix="cgkit-smoke-") as tmp:
        flags = "".join(f"_{name}" for name in ("fuse", "static_io") if getattr(opts, name))
        path = Path(folder or tmp) / f"{opts.workflow}{flags}_{opts.mode or 'default'}.py"
        recipes.write(opts, path, force=True)
        return run_recipe(path, timeout=timeout, nproc=nproc, locate=locate)


@dataclass
class Comparison:
    results: dict[str, SmokeResult]
    located: Located | None = None  # the traced cause, when an approach failed
    speedup_bound: float | None = None  # the profile's bound, when no approach passed
    options: dict[str, list[str]] = field(default_factory=dict)  # the scaffold options each approach ran with

    @property
    def eager_ms(self) -> float | None:
        """The eager time measured by the manual recipe (each recipe times eager in its own process)."""
        for name in ("manual", *self.results):
            report = self.results[name].report if name in self.results else None
            if report and report.eager_ms:
                return report.eager_ms
        return None

    @property
    def passing(self) -> dict[str, float]:
        """ms per step of each approach that captured and matched eager."""
        return {name: r.report.graphed_ms for name, r in self.results.items()
                if r.verdict == PASSED and r.report.graphed_ms}

    @property
    def recommended(self) -> str | None:
        """The fastest approach that captured, matched eager and beat eager's time."""
        faster = {name: ms for name, ms in self.passing.items() if (self.results[name].report.speedup or 0) > 1}
        return min(faster, key=faster.get) if faster else None

    @property
    def fixable(self) -> bool:
        """Every approach failed, and the trace located the cause: fixing it is the way forward."""
        return not self.passing and self.located is not None and bool(self.located.findings)

    def as_dict(self) -> dict:
        data = {"eager_ms": self.eager_ms, "recommended": self.recommended, "options": self.options,
                "results": {name: r.as_dict() for name, r in self.results.items()}}
        if self.located is not None:
            data["located"] = self.located.as_dict()
        if self.speedup_bound is not None:
            data["speedup_bound"] = self.speedup_bound
        return data


def approaches(model: str | None, inputs: str | None, mode: str | None, **given) -> dict[str, recipes.ScaffoldOptions]:
    """The options of each compared approach: every scaffold option goes to the approaches that take it."""
    given = {k: v for k, v in given.items() if v not in (None, False)}
    unused = sorted(k for k in given if not any(k in recipes.workflow(n).options for n in COMPARED_WORKFLOWS))
    if unused:
        raise CgkitError(f"--compare runs {', '.join(COMPARED_WORKFLOWS)}: none takes "
                         f"{', '.join(recipes.option_flag(k) for k in unused)}")
    runs = {}
    for label, name, fixed in COMPARED_APPROACHES:
        takes = recipes.workflow(name).options
        if fixed.get("fuse") and given.get("buckets"):
            continue  # --fuse captures one compiled step, not one per bucket
        runs[label] = recipes.options(name, mode=mode or "inference", model=model, inputs=inputs,
                                      **{k: v for k, v in given.items() if k in takes}, **fixed)
        recipes.plan(runs[label])  # bad options fail before anything runs
    return runs


def compare(model: str | None = None, inputs: str | None = None, mode: str | None = None, timeout: float = 900,
            nproc: int | None = None, progress=None, **other_options) -> Comparison:
    """Run compile, callables and manual on the same step, one after another.

    The scaffold options (``--loss``, ``--optimizer``, ``--amp``, ``--buckets``, ``--layers``, ...) go to
    every approach that takes them, so the comparison runs the user's step; an option no compared
    approach takes is a usage error. ``progress(message)``, when given, hears what runs now and how
    far along the comparison is (each approach takes up to a minute)."""
    if nproc or other_options.get("ddp"):
        raise CgkitError("--compare runs one process per approach: it takes no --nproc or --ddp")
    runs = approaches(model, inputs, mode, **other_options)
    tell = progress or (lambda message: None)
    require_gpu()
    with tempfile.TemporaryDirectory(prefix="cgkit-compare-") as folder:
        results = {}
        for number, (name, opts) in enumerate(runs.items(), start=1):
            tell(f"[{number}/{len(runs)}] running {name} ({opts.mode})...")
            started = time.monotonic()
            results[name] = run_workflow(opts, timeout=timeout, folder=Path(folder), locate=False)
            tell(f"[{number}/{len(runs)}] {name}: {results[name].verdict} in {time.monotonic() - started:.0f} s")
        comparison = Comparison(results, options={name: [recipes.option_flag(k) for k in opts.given()]
                                                  for name, opts in runs.items()})
        failed = [name for name, r in comparison.results.items() if r.verdict == FAILED and r.report is not None]
        if failed:  # one trace covers them all: the same model, inputs and mode
            first = "manual" if "manual" in failed else failed[0]
            tell(f"tracing the step that {first} failed on, to find the line...")
            comparison.located = locate_failure(comparison.results[first].path)
        if not comparison.passing and comparison.located and comparison.located.findings:
            tell("profiling the eager step: how much a graph could gain...")
            profile = recipes.ScaffoldOptions(workflow="profile", mode=mode or "inference", model=model, inputs=inputs)
            report = run_workflow(profile, timeout=timeout, folder=Path(folder), locate=False).report
            comparison.speedup_bound = report.speedup_bound if report else None
    return comparison


def format_result(result: SmokeResult) -> str:
    """A short readable summary of one run."""
    r = result.report or RecipeReport()
    head = f"cgkit smoke: {r.workflow or '?'} ({r.mode or '?'}) - {result.path.name}"
    if r.gpu:
        head += f" on {r.gpu}, torch {r.torch}"
    rows = [head]

    def row(label, value):
        rows.append(f"  {label:<16}{value}")

    if r.workflow == "profile":
        for key in ("kernels_per_step", "kernel_floor_ms", "eager_ms", "gpu_idle_fraction", "speedup_bound", "advice"):
            if getattr(r, key) is not None:
                row(key.replace("_", " "), getattr(r, key))
    else:
        row("captured", _yes(r.captured))
        if r.captured:
            row("correct", f"{_yes(r.correct)}  (max |diff| {r.max_abs_diff}, {r.replays_checked} replays checked)")
        for mismatch in (r.mismatches or [])[:3]:
            row("differs", mismatch)
        if r.graphed_ms:
            row("eager", f"{r.eager_ms:.4f} ms/step")
            floor = r.kernel_floor_ms
            pace = f"{r.speedup}x faster" if r.speedup >= 1 else f"{r.speedup}x eager's speed: SLOWER"
            row("graphed", f"{r.graphed_ms:.4f} ms/step  ({pace}"
                           + (f"; {r.graphed_over_floor}x the kernel-time floor of {floor:.4f} ms)" if floor else ")"))
            if r.replay_only_ms:
                row("replay only", f"{r.replay_only_ms:.4f} ms/step  (the graph without copies in or out)")
            if r.graphed_kernel_ms and floor:
                row("graph kernels", f"{r.graphed_kernel_ms:.4f} ms/step of GPU time (eager's kernels: {floor:.4f} ms)")
            note = slowdown_note(r)
            if note:
                row("why slower" if r.speedup < 1 else "held back", note)
            row("graph memory", f"{r.graph_memory_mb} MB")
            row("graph launches", f"{r.graph_launches_per_step} per step")
        if r.cudagraph_skips is not None:
            row("cudagraph skips", f"{r.cudagraph_skips}" + "".join(f"\n{'':18}{x}" for x in r.cudagraph_skip_reasons or []))
        if r.ranks_agree is not None:
            row("ranks agree", f"{_yes(r.ranks_agree)} (world size {r.world_size})")
    if r.loss:
        row("loss", r.loss)
    if r.error or result.report is None:
        row("usage error" if r.usage_error else "error", r.error or "the recipe printed no report")
        if r.stage and not r.usage_error:
            row("failed while", r.stage)
        located = result.located.findings if result.located else []
        for d in result.diagnoses[:1]:
            row("cause", d.cause)
            if not located:
                row("fix", d.fix)
            row("see", f"{d.reference}  (cgkit explain for more)")
        for line in located_lines(result.located):
            rows.append(line)
        if result.report is None and result.output_tail:
            rows.append("  output:\n" + "\n".join("    " + line for line in result.output_tail.splitlines()[-15:]))
    rows.append(result.verdict.upper())
    return "\n".join(rows)


SLOW_KERNELS_FACTOR = 1.5  # graph kernels this much above eager's: the graph runs other, slower kernels
SLOWER_THAN_EAGER_SECTION = ("references/api-pytorch.md", "when-the-graphed-step-is-slower-than-eager")
SLOWER_THAN_EAGER_DOC = f"{reference(SLOWER_THAN_EAGER_SECTION[0])}#{SLOWER_THAN_EAGER_SECTION[1]}"


def slowdown_note(report: RecipeReport) -> str | None:
    """Why a graphed step is slower than eager, or held back by slower kernels than eager's, in one
    sentence; None when neither."""
    speedup, floor, graph_kernels = report.speedup, report.kernel_floor_ms, report.graphed_kernel_ms
    if not speedup:
        return None
    if floor and graph_kernels and graph_kernels > SLOW_KERNELS_FACTOR * floor:
        return (f"the graph's kernels take {graph_kernels / floor:.1f}x the GPU time of eager's: it runs other, "
                "slower kernels (torch.compile and --fuse let Inductor pick its own). With fp32 matmuls that is "
                'usually the BLAS choice: try torch.backends.cuda.preferred_blas_library("cublaslt") (on the demo '
                f"it took a fused graph from 1.036 to 0.138 ms). See {SLOWER_THAN_EAGER_DOC}")
    if speedup >= 1:
        return None
    return ("the step is not launch-bound (its kernels keep the GPU busy), so the graph's copies cost more "
            f"than the launches it saves; check with `cgkit smoke --workflow profile`. See {SLOWER_THAN_EAGER_DOC}")


def format_comparison(comparison: Comparison) -> str:
    header = (f"{'approach':<13} {'captured':<9} {'correct':<8} {'eager ms':>9} {'ms/step':>9} {'speedup':>8} "
              f"{'memory MB':>10}")
    lines = [header, "-" * len(header)]
    for name, result in comparison.results.items():
        r = result.report or RecipeReport()
        eager, ms = r.eager_ms, r.graphed_ms
        memory = "-" if r.graph_memory_mb is None else str(r.graph_memory_mb)
        lines.append(
            f"{name:<13} {_yes(r.captured):<9} {_yes(r.correct):<8} "
            f"{(f'{eager:.4f}' if eager else '-'):>9} {(f'{ms:.4f}' if ms else '-'):>9} "
            f"{(str(r.speedup) + 'x') if r.speedup else '-':>8} {memory:>10}"
        )
        if result.verdict == FAILED:
            lines.append(f"{'':13} {r.error or 'no report'}")
            cause = _first_located(comparison.located)
            if cause:
                lines.append(f"{'':13} located: {cause}")
    # Each recipe runs in its own process, and eager time moves between processes: a speedup is
    # graphed over the eager step timed in the same process.
    lines.append("(eager ms and speedup: each approach against eager timed in its own process)")
    if any(comparison.options.values()):
        lines.append("options: " + "; ".join(f"{name} {' '.join(flags) or '(none)'}"
                                             for name, flags in comparison.options.items()))
    best = comparison.recommended
    lines.append("")
    if best:
        lines.append(f"recommended: {best} (the fastest that captured, matched eager and beat it)")
    elif comparison.passing:
        lines.append("recommended: stay eager: every approach that captured and matched eager was slower than it "
                     f"(see {SLOWER_THAN_EAGER_DOC})")
    elif comparison.fixable:
        bound = (f"; the profile bounds the gain of a graph at {comparison.speedup_bound}x"
                 if comparison.speedup_bound else "")
        lines.append(f"recommended: fix {_first_located(comparison.located)}, then compare again{bound}")
        lines += located_lines(comparison.located)
    else:
        lines.append("recommended: none of the graphed approaches captured and matched eager")
    return "\n".join(lines)


def _first_located(located: Located | None) -> str | None:
    if located is None or not located.findings:
        return None
    f = located.findings[0]
    return f"{f['path']}:{f['line']} ({f['code']} {f['name']})"


MAX_LOCATED = 3  # findings shown under a failed run (all of them are in --json)


def located_lines(located: Located | None, indent: str = "  ") -> list[str]:
    """The traced cause of a failure: each finding's user line, library line and fix."""
    if located is None:
        return []
    if not located.findings:
        why = located.error or "no operation a graph cannot hold was found in the eager step"
        return [f"{indent}{'located':<16}nothing: {why}"]
    lines = []
    for f in located.findings[:MAX_LOCATED]:
        trace = f.get("trace") or {}
        lines.append(f"{indent}{'located':<16}{f['path']}:{f['line']}: {f['code']} {f['message']}")
        user = trace.get("user")
        if user and user.get("source"):
            lines.append(f"{indent}{'':16}  user:    {user['source']}")
        library = trace.get("library")
        if library:
            lines.append(f"{indent}{'':16}  library: {library['path']}:{library['line']}: {library.get('source', '')}")
        lines.append(f"{indent}{'':16}  fix:     {f['fix']}")
    if len(located.findings) > MAX_LOCATED:
        lines.append(f"{indent}{'':16}(and {len(located.findings) - MAX_LOCATED} more: `cgkit trace` lists them)")
    return lines


def _yes(value) -> str:
    return {True: "yes", False: "no"}.get(value, "-")


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])
