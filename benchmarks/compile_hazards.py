"""What each hazard of a compiled region does under torch.compile: the evidence for the severities of
`cgkit check` in `torch.compile` regions (CG101-CG103, CG201, CG301, CG402, CG404, CG407, CG411, CG401).

Each case is a small function or module with one hazard, called 12 times the way a loop would.
Measured per case:

* frames: frames Dynamo compiled (1 = compiled once; 8 = a recompile on every call until
  `recompile_limit` (8), after which the function runs eagerly; a graph break adds a frame for the
  code after it);
* breaks: distinct graph-break reasons;
* on a GPU (`mode="reduce-overhead"`): CUDA graphs recorded by cudagraph trees and cudagraph skips;
* error: what the run raised (the cudagraph-tree "overwritten" error for kept outputs).

On a CPU the cases run with Dynamo and a counting backend (no Inductor, no CUDA graphs): the Dynamo
behaviour (breaks, recompiles) is the same, only the CUDA-graph columns are empty.

    python benchmarks/compile_hazards.py [--device cpu|cuda] [--json OUT.jsonl]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time

import torch
import torch._dynamo as dynamo
from torch._dynamo.utils import counters

CALLS = 12
logger = logging.getLogger("compile_hazards")


class Recordings:
    """Counts CUDA graphs recorded by cudagraph trees (one per CUDAGraphNode)."""

    def __init__(self):
        self.count = 0
        self._orig = None

    def __enter__(self):
        try:
            from torch._inductor import cudagraph_trees
        except ImportError:
            return self
        self._cls = cudagraph_trees.CUDAGraphNode
        self._orig = self._cls.__init__
        recordings = self

        def counting_init(node, *args, **kwargs):
            recordings.count += 1
            return recordings._orig(node, *args, **kwargs)

        self._cls.__init__ = counting_init
        return self

    def __exit__(self, *exc):
        if self._orig is not None:
            self._cls.__init__ = self._orig


# -- the cases ----------------------------------------------------------------------------------------
def case_item(x):
    return x * x.sum().item()


def case_int(x):
    return x * int(x.sum())


def case_tolist(x):
    return x * len(x.tolist())


def case_if(x):
    if x.sum() > 0:
        return x * 2
    return x


def case_while(x):
    while x.sum() < 100:
        x = x + 1
    return x


COUNTER = 0


def case_global_counter(x):
    global COUNTER
    COUNTER += 1
    return x * 2


SEEN: list = []


def case_appended_list(x):
    SEEN.append(1)
    return x * 2


def case_time_used(x):
    return x * (time.time() % 1.0)


def case_perf_counter(x):
    start = time.perf_counter()
    y = x * 2
    return y, time.perf_counter() - start


def case_log(x):
    logger.info("step")
    return x * 2


def case_print(x):
    print("step", file=sys.stderr)
    return x * 2


def case_tensor_from_list(x):
    # SDXL's time ids: a tensor built from Python numbers (constant here) on the input's device
    ids = [1024.0, 1024.0, 0.0, 0.0, 6.0]
    return x * torch.tensor([ids], device=x.device).sum()


_LOSS_CFG = {"edges": (5.0, 20.0, 30.0, 40.0), "weight": 0.1}


def case_tensor_from_module_tuple(x):
    # a tuple written in a module-level settings dict, read inside the compiled function (CG301 leaves it out)
    return x * torch.tensor(_LOSS_CFG["edges"], device=x.device).sum()


def case_tensor_from_numpy(x):
    # a host array (made each call) moved to the GPU inside the compiled function
    import numpy as np

    mask = np.ones(x.shape, dtype=np.float32)
    return x * torch.as_tensor(mask, device=x.device)


def case_scale(x, scale):
    return x * scale


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * 2


class History(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.history = []

    def forward(self, x):
        self.history.append(x.shape[0])
        return x * 2


class Accumulator(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(8))

    def forward(self, x):
        self.total = self.total + x  # a new tensor bound to the buffer on every call
        return self.total * 2


class Temperature(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.temperature = 1.0

    def forward(self, x):
        return x / self.temperature


def _repeat(compiled, x):
    return [compiled(x) for _ in range(CALLS)]


def _changing_argument(compiled, x):
    return [compiled(x, step) for step in range(CALLS)]


def _constant_argument(compiled, x):
    return [compiled(x, 2) for _ in range(CALLS)]


def _attribute_changed_between_calls(compiled, x):
    out = []
    for step in range(CALLS):
        compiled.temperature = 1.0 + 0.1 * step
        out.append(compiled(x).clone())
    return out


def _kept_in_a_list(compiled, x):
    outputs = []
    for step in range(CALLS):
        outputs.append(compiled(x + step))
    return [float(o.sum()) for o in outputs]  # reads the kept outputs


def _kept_in_a_variable(compiled, x):
    a = compiled(x)
    b = compiled(x + 1)
    return float(a.sum()) + float(b.sum())


def _cloned(compiled, x):
    outputs = []
    for step in range(CALLS):
        outputs.append(compiled(x + step).clone())
    return [float(o.sum()) for o in outputs]


def _kept_across_functions(compiled, x):
    other = torch.compile(_triple, mode="reduce-overhead") if x.is_cuda else torch.compile(_triple, backend="eager")
    a = compiled(x)
    b = other(x)
    c = compiled(x + 1)
    return float(a.sum()) + float(b.sum()) + float(c.sum())


def _double(x):
    return x * 2


def _head(x, n):
    return x[:n] * 2


def _kept_while_size_changes(compiled, x):
    """litgpt's decode loop: a Python int that grows every call (a new size each time), outputs kept."""
    outputs = [compiled(x, n) for n in range(2, 2 + CALLS // 2)]
    return [float(o.sum()) for o in outputs]


def _batches(compiled, x, rows: int, batch: int = 8, epochs: int = 3):
    """An epoch loop over `data[i:i + batch]` for i in range(0, rows, batch): the last slice is shorter
    unless `rows` is a multiple of `batch`."""
    data = torch.randn(rows, device=x.device)
    return [compiled(data[i:i + batch]).clone() for _ in range(epochs) for i in range(0, rows, batch)]


def _batches_ragged_tail(compiled, x):
    return _batches(compiled, x, rows=36)


def _batches_even(compiled, x):
    return _batches(compiled, x, rows=32)


def _triple(x):
    return x * 3


CASES = [
    # (name, rule, callable factory, driver)
    ("tensor.item()", "CG101", lambda: case_item, _repeat),
    ("int(tensor)", "CG103", lambda: case_int, _repeat),
    ("tensor.tolist()", "CG102", lambda: case_tolist, _repeat),
    ("if on a tensor", "CG201", lambda: case_if, _repeat),
    ("while on a tensor", "CG201", lambda: case_while, _repeat),
    ("global counter += 1", "CG402", lambda: case_global_counter, _repeat),
    ("module list append", "CG402", lambda: case_appended_list, _repeat),
    ("self.calls += 1", "CG402", Counter, _repeat),
    ("self.history.append()", "CG402", History, _repeat),
    ("buffer rebound in forward", "CG406", Accumulator, _repeat),
    ("attribute set between calls", "CG404", Temperature, _attribute_changed_between_calls),
    ("number argument changing per call", "CG404", lambda: case_scale, _changing_argument),
    ("number argument constant", "-", lambda: case_scale, _constant_argument),
    ("torch.tensor(list of numbers, device=)", "CG301", lambda: case_tensor_from_list, _repeat),
    ("torch.tensor(module dict tuple, device=)", "-", lambda: case_tensor_from_module_tuple, _repeat),
    ("torch.as_tensor(numpy array, device=)", "CG302", lambda: case_tensor_from_numpy, _repeat),
    ("time.time() used", "CG411", lambda: case_time_used, _repeat),
    ("time.perf_counter()", "CG411", lambda: case_perf_counter, _repeat),
    ("logger.info() of text", "- (CG401 not reported)", lambda: case_log, _repeat),
    ("print() of text", "CG401 (info)", lambda: case_print, _repeat),
    ("output kept in a list", "CG407", lambda: _double, _kept_in_a_list),
    ("output kept in a variable", "CG407", lambda: _double, _kept_in_a_variable),
    ("output cloned", "-", lambda: _double, _cloned),
    ("output kept across another compiled call", "CG407", lambda: _double, _kept_across_functions),
    ("range(0, n, B) slices, ragged last batch", "CG206?", lambda: _double, _batches_ragged_tail),
    ("range(0, n, B) slices, n a multiple of B", "-", lambda: _double, _batches_even),
    ("output kept, argument size grows per call", "CG407 + CG404", lambda: _head, _kept_while_size_changes),
]


def run_case(name, rule, factory, driver, device: str) -> dict:
    dynamo.reset()
    counters.clear()
    target = factory()
    if isinstance(target, torch.nn.Module):
        target = target.to(device)
    if device == "cuda":
        compiled = torch.compile(target, mode="reduce-overhead")
    else:
        compiled = torch.compile(target, backend="eager")
    x = torch.randn(8, device=device)
    error = None
    with Recordings() as rec:
        try:
            driver(compiled, x)
            if device == "cuda":
                torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - what the hazard raises is the measurement
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    frames = counters["frames"]["ok"]  # frames Dynamo converted: the first compile and each recompile
    breaks = len(counters["unimplemented"]) + len(counters["graph_break"])  # distinct break reasons
    return {
        "case": name,
        "rule": rule,
        "device": device,
        "calls": CALLS,
        "frames_compiled": frames,
        "graphs": counters["stats"]["unique_graphs"],
        "graph_breaks": breaks,
        "cudagraphs_recorded": rec.count if device == "cuda" else None,
        "cudagraph_skips": counters["inductor"]["cudagraph_skips"] if device == "cuda" else None,
        "error": error,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", help="write one JSON object per case to this file")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    rows = [run_case(*case, args.device) for case in CASES]
    header = f"torch {torch.__version__}, device {args.device}" + (
        f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else ", Dynamo with the eager backend")
    print(header)
    print(f"{'case':42s} {'rule':24s} {'frames':>6s} {'breaks':>6s} {'cg rec':>6s} {'skips':>5s}  error")
    for r in rows:
        print(f"{r['case']:42s} {r['rule']:24s} {r['frames_compiled']:6d} {r['graph_breaks']:6d} "
              f"{'' if r['cudagraphs_recorded'] is None else r['cudagraphs_recorded']:>6} "
              f"{'' if r['cudagraph_skips'] is None else r['cudagraph_skips']:>5}  {r['error'] or ''}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps({**r, "torch": torch.__version__}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
