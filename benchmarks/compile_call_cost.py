"""The compile recipe's call against the anchors' bare compiled call: one process, interleaved (GPU).

    python benchmarks/compile_call_cost.py [--workload mlp16x512_b8] [--rounds 5]

Renders cgkit's `compile` inference recipe for a workload, imports its `make_graphed`, and times
three calls of the same model, round after round in one process, with no profiler session before
them (a profiler can leave later launches slower):

  peer         compiled(x), as benchmarks/peer_anchors.py calls it
  replay_only  the recipe's bare call: cudagraph_mark_step_begin(), then compiled(x)
  recipe       the recipe's call: the above, and the outputs cloned so they outlive the next call

Prints one JSON line: the median ms per call of each, and each over `peer`.
"""

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench_recipes import exit_with, options  # noqa: E402

from cgkit import recipes, smoke  # noqa: E402


def load_recipe(path: Path):
    """The rendered recipe as a module (its main() does not run on import)."""
    spec = importlib.util.spec_from_file_location("compile_recipe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="mlp16x512_b8")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    smoke.require_gpu()
    import torch

    with tempfile.TemporaryDirectory(prefix="cgkit-compile-") as tmp:
        path = Path(tmp) / "compile_recipe.py"
        recipes.write(options(args.workload, "compile", "inference"), path)
        recipe = load_recipe(path)
    with torch.no_grad():
        model = recipe.build_model().cuda().eval()
        example = recipe.to_device(recipe.build_inputs())
        run = recipe.make_graphed(model, example)
        compiled = torch.compile(model, mode="reduce-overhead")
        for _ in range(3):
            compiled(*example)
        calls = {
            "peer": lambda: compiled(*example),
            "replay_only": run.replay_only,
            "recipe": lambda: run(*example),
        }
        samples = {name: [] for name in calls}
        for _ in range(args.rounds):
            for name, fn in calls.items():
                # the recipe's own timer, run as long as the peer script runs its own
                samples[name].append(recipe.time_ms(fn, warmup=10, iters=200, repeats=5))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    print(json.dumps({
        "workload": args.workload,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(),
        "ms": {name: round(ms, 4) for name, ms in medians.items()},
        "over_peer": {name: round(ms / medians["peer"], 3) for name, ms in medians.items()},
    }))
    return 0


if __name__ == "__main__":
    exit_with(main, __file__)
