"""The ``cgkit`` command line: parse options, call the library, format the result.

Each command is a thin layer over an importable module; nothing here imports torch.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cgkit import __version__, recipes
from cgkit.errors import CgkitError

_HELP = """CUDA Graphs for PyTorch workloads.

\b
  cgkit scaffold --workflow manual -o graphed.py   write a capture script for your model
  cgkit smoke graphed.py                           prove it on the GPU: captured, correct, faster
"""


class _Group(click.Group):
    """Lists commands in the order they were added (the order of a user's workflow)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


@click.group(cls=_Group, help=_HELP, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="cgkit")
def main() -> None:
    pass


def _fail(message: str) -> None:
    """Report a usage problem the way click does (exit status 2)."""
    raise click.UsageError(message)


def scaffold_options(func):
    """The options shared by `scaffold` and `smoke --workflow` (one definition for both)."""
    decorators = [
        click.option("--workflow", "-w", metavar="NAME", help=f"One of: {', '.join(recipes.WORKFLOWS)}."),
        click.option("--mode", type=click.Choice(recipes.MODES), help="inference or training (default: the workflow's first)."),
        click.option("--model", metavar="REF", help="Factory returning your nn.Module: path/to/file.py:name or package.module:name."),
        click.option("--inputs", metavar="REF", help="Factory returning a tuple of example input tensors."),
        click.option("--loss", metavar="REF", help="Training loss: loss_fn(output, *inputs) -> scalar tensor."),
        click.option("--amp", type=click.Choice(recipes.AMP_CHOICES), help="Autocast dtype (default none)."),
        click.option("--optimizer", type=click.Choice(recipes.OPTIMIZER_CHOICES), help="Training optimizer (default adam)."),
        click.option("--ddp", is_flag=True, default=False, help="DistributedDataParallel under torchrun (training)."),
        click.option("--buckets", metavar="SIZES", help="Variable batch: one graph per batch size, e.g. 1,2,4,8 (manual inference)."),
        click.option("--layers", metavar="PATH", help="Graph each layer of model.PATH separately (callables), e.g. model.blocks."),
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def _scaffold_opts(workflow: str | None, **values) -> recipes.ScaffoldOptions:
    if not workflow:
        _fail("--workflow is required (see `cgkit scaffold --list`)")
    return recipes.ScaffoldOptions(workflow=workflow, **values)


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
        width = max(map(len, recipes.WORKFLOWS))
        for wf in recipes.WORKFLOWS.values():
            click.echo(f"{wf.name:<{width}}  {wf.summary}")
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


def _run_hint(opts: recipes.ScaffoldOptions, output: Path) -> str:
    if opts.ddp:
        return f"torchrun --nproc_per_node=NGPUS {output}"
    return f"cgkit smoke {output}"
