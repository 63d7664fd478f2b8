"""Run a user's script as ``__main__`` with seeds set and CUDA-graph use counted (``cgkit smoke --baseline``).

    python -m cgkit._probe SCRIPT [ARGS...]

Seeds Python's, NumPy's and torch's generators (``CGKIT_SEED``, default 0) so two scripts start
alike, counts graph captures and replays (every API ends in ``torch.cuda.CUDAGraph``: manual
graphs, make_graphed_callables and cudagraph trees alike) and optimizer steps, and writes the counts
as JSON to the file ``CGKIT_PROBE_OUT`` names when the script ends, however it ends.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import runpy
import sys
import time


class _AfterTorchImport:
    """A meta-path finder that runs ``then(torch)`` once torch is imported: scripts that never import
    torch do not pay for it."""

    def __init__(self, then):
        self.then = then

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader, then = spec.loader, self.then
        original_exec = loader.exec_module

        def exec_module(module):
            original_exec(module)
            then(module)

        loader.exec_module = exec_module
        return spec


def _count(counters: dict, torch) -> None:
    seed = int(os.environ.get("CGKIT_SEED", "0"))
    torch.manual_seed(seed)
    graph = torch.cuda.CUDAGraph
    original_replay, original_end = graph.replay, graph.capture_end

    def replay(self, *args, **kwargs):
        counters["graph_replays"] += 1
        return original_replay(self, *args, **kwargs)

    def capture_end(self, *args, **kwargs):
        counters["graph_captures"] += 1
        return original_end(self, *args, **kwargs)

    graph.replay, graph.capture_end = replay, capture_end

    def stepped(optimizer, args, kwargs):
        counters["optimizer_steps"] += 1

    from torch.optim.optimizer import register_optimizer_step_post_hook

    register_optimizer_step_post_hook(stepped)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m cgkit._probe SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    seed = int(os.environ.get("CGKIT_SEED", "0"))
    random.seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:
        pass
    counters = {"graph_captures": 0, "graph_replays": 0, "optimizer_steps": 0, "seconds": 0.0}
    sys.meta_path.insert(0, _AfterTorchImport(lambda torch: _count(counters, torch)))
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
    started = time.perf_counter()
    try:
        runpy.run_path(argv[0], run_name="__main__")
    finally:
        counters["seconds"] = round(time.perf_counter() - started, 4)
        out = os.environ.get("CGKIT_PROBE_OUT")
        if out:
            with open(out, "w", encoding="utf-8") as fh:
                json.dump(counters, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
