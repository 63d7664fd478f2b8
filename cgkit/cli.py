"""The ``cgkit`` command line: parse options, call the library, format the result.

Each command is a thin layer over an importable module; nothing here imports torch.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import click

from cgkit import __version__, recipes
from cgkit import baseline as baseline_lib
from cgkit import smoke as smoke_lib
from cgkit.errors import CgkitError

_HELP = """CUDA Graphs for PyTorch workloads.

\b
  cgkit scaffold --workflow manual -o graphed.py   write a capture script for your model
  cgkit check train.py                             find capture hazards in your script
  cgkit trace --model m.py:build --inputs m.py:batch   run the step and name what a graph cannot hold
  cgkit smoke graphed.py                           prove it on the GPU: captured, correct, faster
  cgkit explain "ERROR TEXT"                       cause and fix of a capture error
"""

# The order of a user's work: write, check, prove, understand failures, then the extras.
_COMMAND_ORDER = ("scaffold", "check", "trace", "smoke", "explain", "rules", "rule", "skill")


class _Group(click.Group):
    """Lists commands in the order of a user's work rather than alphabetically."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        known = [name for name in _COMMAND_ORDER if name in self.commands]
        return known + [name for name in self.commands if name not in known]


@click.group(cls=_Group, help=_HELP, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="cgkit")
def main() -> None:
    pass


def _fail(message: str) -> None:
    """Report a usage problem the way click does (exit status 2)."""
    raise click.UsageError(message)


_OPTIONS = {
    "workflow": click.option("--workflow", "-w", metavar="NAME", help=f"One of: {', '.join(recipes.WORKFLOWS)}."),
    "mode": click.option("--mode", type=click.Choice(recipes.MODES),
                         help="inference or training (default: the workflow's first)."),
    "model": click.option("--model", metavar="REF",
                          help="Factory returning your nn.Module: path/to/file.py:name or package.module:name."),
    "inputs": click.option("--inputs", metavar="REF",
                           help="Factory returning example inputs: a tuple (positional), a dict (keyword) "
                                "or an (args, kwargs) pair."),
    "loss": click.option("--loss", metavar="REF",
                         help="Training loss: loss_fn(output, *args, **kwargs) -> scalar tensor (default: the "
                              "mean square of every floating-point output)."),
    "amp": click.option("--amp", type=click.Choice(recipes.AMP_CHOICES), help="Autocast dtype (default none)."),
    "dtype": click.option("--dtype", type=click.Choice(recipes.AMP_CHOICES),
                          help="Cast the model's parameters and floating-point inputs (default none: as built)."),
    "optimizer": click.option("--optimizer", type=click.Choice(recipes.OPTIMIZER_CHOICES),
                              help="Training optimizer (default adam)."),
    "ddp": click.option("--ddp", is_flag=True, default=False, help="DistributedDataParallel under torchrun (training)."),
    "buckets": click.option("--buckets", metavar="SIZES",
                            help="Variable batch: one graph per batch size, e.g. 1,2,4,8 (manual inference)."),
    "layers": click.option("--layers", metavar="PATH",
                           help="Graph each layer of model.PATH separately (callables), e.g. model.blocks."),
    "fuse": click.option("--fuse", is_flag=True, default=False,
                         help="manual: compile with Inductor (its CUDA graphs off), then capture the fused kernels."),
    "static_io": click.option("--static-io", is_flag=True, default=False,
                              help="Inference: you write the graph's inputs and read its outputs in place (no copies)."),
    "optimizer_step": click.option("--optimizer-step", type=click.Choice(recipes.OPTIMIZER_STEP_CHOICES),
                                   help="compile training: the optimizer step compiled too (default) or eager."),
    "gradients": click.option("--gradients", type=click.Choice(recipes.GRADIENTS_CHOICES),
                              help="Training, compile or manual --fuse: gradients from one compiled "
                                   "torch.func.grad_and_value (func; compile's default) or from the compiled "
                                   "forward and loss.backward() (autograd; manual --fuse's default)."),
    "fp8": click.option("--fp8", type=click.Choice(recipes.FP8_CHOICES), help="TE FP8 recipe (te; default none)."),
    "microbatches": click.option("--microbatches", type=click.IntRange(min=1),
                                 help="Microbatches per step (te: TE's _order schedule; mcore-*)."),
    "impl": click.option("--impl", type=click.Choice(recipes.MCORE_IMPLS),
                         help="Megatron-Core per-layer graphs (mcore-layer; default local)."),
    "emit": click.option("--emit", type=click.Choice(recipes.EMIT_CHOICES),
                         help="mcore-*: a runnable script, or only the Megatron-LM flags."),
}
# What `cgkit trace` takes of them: the options that decide which step runs.
_TRACE_OPTIONS = ("workflow", "mode", "model", "inputs", "loss", "amp", "optimizer")


def _with_options(names):
    """Apply the named shared options to a command (one definition for every command that takes them)."""

    def decorate(func):
        for name in reversed(names):
            func = _OPTIONS[name](func)
        return func

    return decorate


def scaffold_options(func):
    """The options shared by `scaffold` and `smoke --workflow`."""
    return _with_options(tuple(_OPTIONS))(func)


def _scaffold_opts(workflow: str | None, **values) -> recipes.ScaffoldOptions:
    if not workflow:
        _fail("--workflow is required (see `cgkit scaffold --list`)")
    return recipes.options(workflow, **values)


@main.command()
@scaffold_options
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write the script here (default: stdout).")
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@click.option("--list", "list_workflows", is_flag=True, help="List the workflows and exit.")
def scaffold(output: Path | None, force: bool, list_workflows: bool, workflow: str | None, **values) -> None:
    """Render a ready-to-run capture script for a workflow.

    Without --model, the script uses cgkit's built-in launch-bound demo model, so it runs as is.

    \b
    Examples:
      cgkit scaffold --list
      cgkit scaffold --workflow manual -o graphed.py
      cgkit scaffold --workflow manual --mode training --optimizer adamw \\
          --model my_model.py:build --inputs my_model.py:example_batch -o train_graphed.py
      cgkit scaffold --workflow manual --buckets 1,2,4,8 -o serve_graphed.py
    """
    if list_workflows:
        click.echo(recipes.workflow_table(), nl=False)
        return
    try:
        opts = _scaffold_opts(workflow, **values)
        if output is None:
            click.echo(recipes.render(opts), nl=False)
        else:
            recipes.write(opts, output, force=force)
            click.echo(f"wrote {output}  (run: {_run_hint(opts, output)})", err=True)
    except CgkitError as exc:
        _fail(str(exc))


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("recipe", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@scaffold_options
@click.option("--compare", is_flag=True, help="Run compile, callables and manual on one model and recommend one.")
@click.option("--baseline", type=click.Path(exists=True, dir_okay=False, path_type=Path), metavar="ORIGINAL.py",
              help="Prove RECIPE, your own graphed script, against the script it came from (see below).")
@click.option("--runs", type=click.IntRange(min=1), default=baseline_lib.DEFAULT_RUNS, show_default=True,
              help="--baseline: runs of each script, alternated.")
@click.option("--rtol", type=float, default=baseline_lib.DEFAULT_RTOL, show_default=True,
              help="--baseline: relative tolerance on printed numbers.")
@click.option("--atol", type=float, default=baseline_lib.DEFAULT_ATOL, show_default=True,
              help="--baseline: absolute tolerance on printed numbers.")
@click.option("--ignore", "ignore_lines", multiple=True, metavar="REGEX",
              help="--baseline: output lines to leave out of the comparison (timestamps, paths). Repeatable.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option("--timeout", default=900.0, show_default=True, metavar="S", help="Seconds before a run is stopped.")
@click.option("--nproc", type=click.IntRange(min=1), metavar="N", help="Processes per node for torchrun (DDP recipes; default 1).")
def smoke(recipe: Path | None, script_args: tuple[str, ...], compare: bool, baseline: Path | None, runs: int,
          rtol: float, atol: float, ignore_lines: tuple[str, ...], as_json: bool, timeout: float, nproc: int | None,
          workflow: str | None, **values) -> None:
    """Run a recipe on the GPU and report: captured? same results as eager? how much faster?

    With --baseline, RECIPE is your own graphed script and ORIGINAL the script it came from: both
    run as they are (same arguments after --, environment and seeds), alternated, --runs times.
    Their printed lines are compared (numbers within --rtol/--atol; numbers with a time or rate
    unit compared as speed; values printed with cgkit.emit(name, value) too), CUDA-graph replays
    are counted in the candidate, and the speed is the baseline's time over the candidate's.

    Exit status: 0 captured and correct (with --compare: at least one approach was; with
    --baseline: outputs match, graphs replayed and it is faster), 1 otherwise, 2 usage error or no
    CUDA device.

    \b
    Examples:
      cgkit smoke graphed.py
      cgkit smoke --workflow manual --mode training --json
      cgkit smoke --compare --model my_model.py:build --inputs my_model.py:example_batch --mode training \\
          --loss my_model.py:loss_fn --optimizer adamw
      cgkit smoke train_graphed.py --baseline train.py -- --epochs 1
    """
    chosen = [name for name, on in (("a RECIPE file", recipe), ("--workflow", workflow), ("--compare", compare)) if on]
    if len(chosen) != 1:
        _fail("give exactly one of: a RECIPE file, --workflow NAME, or --compare")
    if script_args and baseline is None:
        _fail(f"unexpected argument {script_args[0]!r}: a script's own arguments go with --baseline, after --")
    if baseline is not None:
        if recipe is None or any(v not in (None, False) for v in values.values()) or nproc:
            _fail("--baseline compares two scripts: give the graphed script (RECIPE) and --baseline ORIGINAL.py only")
        try:
            result = baseline_lib.prove(recipe, baseline, list(script_args), runs=runs, rtol=rtol, atol=atol,
                                        timeout=timeout, ignore=list(ignore_lines))
        except CgkitError as exc:
            _fail(str(exc))
        click.echo(baseline_lib.as_json(result) if as_json else baseline_lib.format_result(result))
        sys.exit(0 if result.passed else 1)
    try:
        if compare:
            comparison = smoke_lib.compare(timeout=timeout, nproc=nproc, progress=_progress, **values)
            click.echo(json.dumps(comparison.as_dict()) if as_json else smoke_lib.format_comparison(comparison))
            sys.exit(0 if comparison.passing else 1)
        if values.get("emit") == "flags":
            _fail("--emit flags renders Megatron-LM flags, not a script: use it with `cgkit scaffold`")
        if recipe is not None:
            if any(v not in (None, False) for v in values.values()):
                _fail("scaffold options go with --workflow, not with a RECIPE file")
            result = smoke_lib.run_recipe(recipe, timeout=timeout, nproc=nproc)
        else:
            result = smoke_lib.run_workflow(_scaffold_opts(workflow, **values), timeout=timeout, nproc=nproc)
    except smoke_lib.NoGPU as exc:
        click.echo(f"cgkit smoke: {exc}", err=True)
        sys.exit(2)
    except CgkitError as exc:
        _fail(str(exc))
    click.echo(json.dumps(result.as_dict()) if as_json else smoke_lib.format_result(result))
    sys.exit(2 if result.usage_error else 0 if result.verdict == smoke_lib.PASSED else 1)


def _progress(message: str) -> None:
    """What a long run is doing now, on stderr (stdout stays the report)."""
    click.echo(f"cgkit smoke: {message}", err=True)


def _run_hint(opts: recipes.ScaffoldOptions, output: Path) -> str:
    if opts.ddp:
        return f"torchrun --nproc_per_node=NGPUS {output}"
    return f"cgkit smoke {output}"


# ---------------------------------------------------------------------------- explain, skill


@main.command()
@click.argument("error", required=False, metavar="[ERROR_TEXT | LOG_FILE | -]")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (for tools).")
@click.option("--list", "list_entries", is_flag=True, help="List every error cgkit recognises and exit.")
def explain(error: str | None, as_json: bool, list_entries: bool) -> None:
    """Explain a CUDA-graph error: its cause, the fix, and the reference section.

    ERROR_TEXT is the message itself, a path to a log file, or `-` (or nothing) to read stdin.
    Exit status: 0 recognised, 1 not recognised (the general checklist is printed), 2 usage error.

    \b
    Examples:
      cgkit explain "CUDA error: operation not permitted when stream is capturing"
      cgkit explain train.log --json
      python train.py 2>&1 | cgkit explain
      cgkit explain --list
    """
    from cgkit import explain as explain_lib
    from cgkit.knowledge import ENTRIES

    if list_entries:
        if error is not None:
            _fail("--list takes no ERROR_TEXT")
        if as_json:
            click.echo(json.dumps([{"id": e.id, "title": e.title, "reference": explain_lib.reference(e)} for e in ENTRIES]))
        else:
            width = max(len(e.id) for e in ENTRIES)
            for e in ENTRIES:
                click.echo(f"{e.id:<{width}}  {e.title}")
        return
    if error is None and sys.stdin.isatty():
        _fail('give the error text, a log file, or pipe the log in (see `cgkit explain --help`)')
    try:
        text = explain_lib.read_error_text(error, sys.stdin)
    except CgkitError as exc:
        _fail(str(exc))
    diagnoses = explain_lib.diagnose(text)
    if as_json:
        click.echo(json.dumps(explain_lib.as_json(diagnoses)))
    else:
        click.echo(explain_lib.format_text(diagnoses), nl=False)
    sys.exit(0 if diagnoses else 1)


@main.group(cls=_Group)
def skill() -> None:
    """Install the cgkit skill (SKILL.md, references/, recipes/) for an AI coding assistant.

    \b
    Examples:
      cgkit skill install                      # into ~/.claude/skills/cgkit
      cgkit skill install --dest .claude/skills --force
      cgkit skill path
    """


@skill.command("install")
@click.option(
    "--dest",
    type=click.Path(file_okay=False, path_type=Path),
    help="The assistant's skills folder (default: ~/.claude/skills); the skill goes to DEST/cgkit.",
)
@click.option("--force", is_flag=True, help="Replace an earlier install of the skill.")
def skill_install(dest: Path | None, force: bool) -> None:
    """Copy the skill bundle to DEST/cgkit (refuses to overwrite without --force).

    \b
    Examples:
      cgkit skill install
      cgkit skill install --dest ./.claude/skills     # a project-level skills folder
    """
    from cgkit import skill as skill_lib

    try:
        target = skill_lib.install(dest, force=force)
    except CgkitError as exc:
        _fail(str(exc))
    click.echo(f"installed the cgkit skill in {target}")


@skill.command("path")
def skill_path() -> None:
    """Print the folder that holds this cgkit's skill bundle (SKILL.md, references/, recipes/).

    \b
    Example:
      cgkit skill path
    """
    from cgkit.bundle import bundle_root

    try:
        click.echo(str(bundle_root()))
    except FileNotFoundError as exc:
        raise click.ClickException(str(exc)) from None


# -- trace: run the step and record what a graph cannot hold (cgkit.trace) ------------------------


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("script", required=False, type=click.Path(path_type=str))
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@_with_options(_TRACE_OPTIONS)
@click.option("--step", metavar="REF", help="Your own step function (FILE.py:fn), called as fn(*inputs) "
              "with --inputs, or fn() without.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="Where the step runs: auto takes the GPU when there is one, else the CPU.")
@click.option("--calls", type=click.IntRange(min=3), default=3, show_default=True, metavar="N",
              help="Calls of the step: a warm-up, then N-1 recorded calls on varied inputs.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif", "github"]), default="text",
              show_default=True, help="Output format (as `cgkit check`).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings are reported (2 still means an error).")
def trace(script: str | None, script_args: tuple[str, ...], step: str | None, device: str, calls: int, fmt: str,
          exit_zero: bool, **values) -> None:
    """Run the step that would be captured, eagerly, and report every operation a CUDA graph cannot hold.

    It sees inside libraries (torch.nn, optimizers, ...), which `cgkit check` cannot: each finding
    has your line, the library line where the operation ran, and the fix. Give the same options as
    `scaffold` (--model/--inputs, --mode, --loss, ...), your own --step, or a SCRIPT whose capture
    regions (torch.cuda.graph, make_graphed_callables, torch.compile with CUDA graphs) are traced,
    with -- before the script's own arguments. Works on a CPU (standing in for the GPU) and on a GPU.

    Exit status: 0 nothing found, 1 findings, 2 usage error or the code did not run.

    \b
    Examples:
      cgkit trace --model my_model.py:build --inputs my_model.py:example_batch
      cgkit trace --model my_model.py:build --inputs my_model.py:example_batch --mode training
      cgkit trace --step train.py:train_step --inputs train.py:batch --format json
      cgkit trace graphed.py -- --steps 10
    """
    try:
        from cgkit.check.formats import render
        from cgkit.trace import StepFailed, TraceOptions, trace_script, trace_step, validate
    except ImportError as exc:
        if "torch" not in str(exc):
            raise
        click.echo("cgkit trace: it runs your step, so it needs torch: pip install torch (a CPU build is enough)",
                   err=True)
        sys.exit(2)
    if script is not None and (step or any(v is not None for v in values.values())):
        _fail("a SCRIPT is traced as it runs: give it alone (its own arguments after --), or use "
              "--model/--inputs or --step instead")
    if script is None and script_args:
        _fail(f"unexpected argument {script_args[0]!r} (a script's own arguments follow the SCRIPT and --)")
    workflow = values.get("workflow")
    if workflow is not None and workflow not in recipes.WORKFLOWS:
        _fail(f"unknown workflow {workflow!r}; choose one of: {', '.join(recipes.WORKFLOWS)}")
    try:
        if script is not None:
            result = trace_script(script, list(script_args), device, output_to_stderr=fmt != "text")
        else:
            options = TraceOptions(step=step, device=device, calls=calls, **values)
            validate(options)
            # What the user's factories and model print must not break a machine-read report
            # (nanoGPT's constructor prints its parameter count).
            quiet = contextlib.redirect_stdout(sys.stderr) if fmt != "text" else contextlib.nullcontext()
            with quiet:
                result = trace_step(options)
    except StepFailed as exc:
        click.echo(f"cgkit trace: {exc}", err=True)
        sys.exit(2)
    except CgkitError as exc:
        _fail(str(exc))
    click.echo(render(result, fmt), nl=False)
    for note in result.notes:
        if fmt == "text":
            click.echo(f"note: {note}")
    for error in result.errors:
        click.echo(f"cgkit trace: {error}", err=True)
    if result.errors:
        sys.exit(2)
    if not exit_zero:
        sys.exit(result.exit_code)


# -- check: the region-aware static checker (cgkit.check) ------------------------------------------


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=str))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif", "github"]), default="text",
              show_default=True, help="Output format.")
@click.option("--select", multiple=True, metavar="CODES", help="Only these codes or prefixes (e.g. CG1,CG402).")
@click.option("--ignore", multiple=True, metavar="CODES", help="Skip these codes or prefixes.")
@click.option("--region", "regions", multiple=True, metavar="NAME",
              help="Also check this function as a captured region: func, outer.inner, Class.method or Class "
              "(its forward). Adds to the regions found; never hides a finding. Repeatable.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=str),
              help="pyproject.toml to read [tool.cgkit] from (default: found by walking up from PATHS).")
@click.option("--no-config", is_flag=True, help="Ignore [tool.cgkit] settings.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings are reported (2 still means an error).")
def check(paths: tuple[str, ...], fmt: str, select: tuple[str, ...], ignore: tuple[str, ...],
          regions: tuple[str, ...], config_path: str | None, no_config: bool, exit_zero: bool) -> None:
    """Check scripts for CUDA-graph capture hazards inside captured regions.

    PATHS are Python files, notebooks or directories (searched recursively; default: the current
    directory). Exit status: 0 when nothing at warning or above, 1 when there are findings, 2 for
    usage errors (a path that does not exist, a file that is not Python, an unknown --region, no
    Python file found: nothing checked) or internal errors.

    \b
    Examples:
      cgkit check train.py
      cgkit check src/ --format github
      cgkit check train.py --region train_step --select CG1,CG2
    """
    from cgkit.check import check_paths
    from cgkit.check.config import Config, load_config
    from cgkit.check.formats import render

    paths = paths or (".",)
    try:
        config = Config() if no_config else load_config(list(paths), explicit=config_path)
        result = check_paths(list(paths), select=list(select) or None, ignore=list(ignore),
                             regions=list(regions), config=config)
    except CgkitError as exc:
        _fail(str(exc))
    click.echo(render(result, fmt), nl=False)
    for error in result.errors:
        click.echo(f"cgkit check: {error}", err=True)
    if result.errors:
        sys.exit(2)
    if not exit_zero:
        sys.exit(result.exit_code)


@main.command("rules")
@click.option("--json", "as_json", is_flag=True, help="Print the rule table as JSON.")
def rules_cmd(as_json: bool) -> None:
    """List the rules of `cgkit check`: code, name, category, severity (manual capture / torch.compile).

    \b
    Examples:
      cgkit rules
      cgkit rules --json
    """
    from cgkit.check.docs import rule_table

    click.echo(rule_table(as_json), nl=False)


@main.command("rule")
@click.argument("code")
def rule_cmd(code: str) -> None:
    """Print one rule's documentation (by code, e.g. CG101, or by name, e.g. tensor-item).

    \b
    Examples:
      cgkit rule CG101
      cgkit rule python-scalar
    """
    from cgkit.check import get_rule
    from cgkit.check.docs import rule_markdown

    found = get_rule(code)
    if found is None:
        _fail(f"unknown rule {code!r} (see `cgkit rules`)")
    click.echo(rule_markdown(found, heading_level=1), nl=False)
