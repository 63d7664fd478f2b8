"""Facts about manual capture that `cgkit check` rules rest on, measured on a GPU (one JSON line each).

* cpu-rng-state-in-capture: `torch.get_rng_state()` / `set_rng_state()` (the CPU generator) inside
  `torch.cuda.graph` capture and replay without error (why CG408 leaves them out).
* log-call-in-capture: a `logging` call of Python values inside capture runs once and does not
  break the capture (why CG412 is silent under manual capture).
* capture-begin-default-stream: `CUDAGraph.capture_begin()` on the default stream raises (CG603),
  and the error text.
* capture-begin-side-stream: the same on a side stream captures and replays right.
* graph-stream-default: `torch.cuda.graph(g, stream=torch.cuda.default_stream())` (CG603).
* graph-stream-current: `torch.cuda.graph(g, stream=torch.cuda.current_stream())` with no side stream
  set, so the current stream is the default one (CG603).
* as-tensor-host-array-in-capture: `torch.as_tensor(numpy_array, device="cuda")` inside capture (CG302).
* tensor-of-python-list-in-capture: `torch.tensor([...], device="cuda")` inside capture (CG301).
* autocast-inside-capture: autocast entered and left inside the capture, weights changed between
  replays: whether the replay uses the new weights (what CG501 leaves out: it reports autocast around
  a capture, where casts made before it are cached).
* parameter-storage-swap-in-capture: a SAM-like step captured with `p.data = saved` (CG406) and with
  `p.data.copy_(saved)`: whether three replays give what three eager steps give.
* host-generator-object-in-capture: a number drawn from `np.random.RandomState` inside capture is the
  same on every replay (CG403).

    python benchmarks/capture_facts.py
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import torch


def _fact(name: str, fn) -> dict:
    try:
        value = fn()
        out = {"fact": name, "ok": True, **value}
    except Exception as exc:  # noqa: BLE001 - the error is the measurement
        out = {"fact": name, "ok": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
    try:
        torch.cuda.synchronize()
    except RuntimeError:
        pass
    return out


def cpu_rng_state_in_capture() -> dict:
    x = torch.randn(64, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        state = torch.get_rng_state()
        torch.set_rng_state(state)
        y = x * 2
    x.fill_(3.0)
    g.replay()
    torch.cuda.synchronize()
    return {"replayed_right": bool(torch.equal(y, x * 2))}


def log_call_in_capture() -> dict:
    logger = logging.getLogger("capture_facts")
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    x = torch.randn(64, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        logger.info("capturing")
        y = x + 1
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    logger.removeHandler(handler)
    return {"log_records": len(records), "replays": 3, "replayed_right": bool(torch.equal(y, x + 1))}


def graph_on_default_stream() -> dict:
    x = torch.randn(64, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=torch.cuda.default_stream()):
        y = x * 2
    return {"captured": True, "y_shape": list(y.shape)}


def graph_on_current_stream() -> dict:
    x = torch.randn(64, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=torch.cuda.current_stream()):
        y = x * 2
    return {"captured": True, "y_shape": list(y.shape)}


def as_tensor_host_array_in_capture() -> dict:
    import numpy as np

    table = np.arange(4, dtype=np.float32)
    x = torch.ones(4, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = x * torch.as_tensor(table, device="cuda")
    return {"captured": True, "y_shape": list(y.shape)}


def tensor_of_python_list_in_capture() -> dict:
    x = torch.ones(2, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = x * torch.tensor([1.0, 2.0], device="cuda")
    return {"captured": True, "y_shape": list(y.shape)}


def autocast_inside_capture() -> dict:
    """autocast (cache on, the default) entered and left inside the capture; weights changed between
    replays: does the replay use the new weights (the casts are recorded), or stale cached copies?"""
    lin = torch.nn.Linear(64, 64).cuda()
    x = torch.randn(8, 64, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                lin(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = lin(x)
    with torch.no_grad():
        lin.weight.add_(1.0)
    g.replay()
    torch.cuda.synchronize()
    with torch.autocast("cuda", dtype=torch.bfloat16), torch.no_grad():
        expected = lin(x)
    return {"replay_uses_new_weights": bool(torch.allclose(y.float(), expected.float(), rtol=1e-2, atol=1e-2))}


def capture_begin_default_stream() -> dict:
    x = torch.randn(64, device="cuda")
    g = torch.cuda.CUDAGraph()
    g.capture_begin()
    y = x * 2
    g.capture_end()
    return {"captured": True, "y_shape": list(y.shape)}


def capture_begin_side_stream() -> dict:
    x = torch.randn(64, device="cuda")
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        g.capture_begin()
        y = x * 2
        g.capture_end()
    torch.cuda.current_stream().wait_stream(s)
    x.fill_(2.0)
    g.replay()
    torch.cuda.synchronize()
    return {"replayed_right": bool(torch.equal(y, x * 2))}


def _sam_like(swap: bool, steps: int = 3) -> tuple:
    """Perturb the weight, run the forward, put the weight back: by rebinding ``.data`` or by copying."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8, bias=False).cuda()
    x = torch.randn(4, 8, device="cuda")
    start = lin.weight.detach().clone()

    def step():
        p = lin.weight
        saved = p.data.clone()
        p.data.add_(0.1)
        out = lin(x)
        if swap:
            p.data = saved
        else:
            p.data.copy_(saved)
        return out

    with torch.no_grad():
        expected = torch.nn.functional.linear(x, start + 0.1)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            step()
        torch.cuda.current_stream().wait_stream(side)
        lin.weight.data.copy_(start)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = step()
        lin.weight.data.copy_(start)
        outs = []
        for _ in range(steps):
            g.replay()
            torch.cuda.synchronize()
            outs.append(bool(torch.allclose(out, expected, atol=1e-5)))
    return outs, bool(torch.allclose(lin.weight, start, atol=1e-5))


def parameter_storage_swap_in_capture() -> dict:
    swapped, swapped_weight_back = _sam_like(swap=True)
    copied, copied_weight_back = _sam_like(swap=False)
    return {"swap_replays_match_eager": swapped, "swap_weight_restored": swapped_weight_back,
            "copy_replays_match_eager": copied, "copy_weight_restored": copied_weight_back}


def host_generator_object_in_capture() -> dict:
    import numpy as np

    rng = np.random.RandomState(0)
    x = torch.ones(4, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = x * float(rng.uniform())
    values = []
    for _ in range(3):
        g.replay()
        torch.cuda.synchronize()
        values.append(float(y[0]))
    return {"replayed_values": values, "all_equal": len(set(values)) == 1}


FACTS = {
    "cpu-rng-state-in-capture": cpu_rng_state_in_capture,
    "log-call-in-capture": log_call_in_capture,
    "capture-begin-side-stream": capture_begin_side_stream,
    "autocast-inside-capture": autocast_inside_capture,
    "graph-stream-default": graph_on_default_stream,
    "graph-stream-current": graph_on_current_stream,
    "as-tensor-host-array-in-capture": as_tensor_host_array_in_capture,
    "tensor-of-python-list-in-capture": tensor_of_python_list_in_capture,
    "capture-begin-default-stream": capture_begin_default_stream,
    "parameter-storage-swap-in-capture": parameter_storage_swap_in_capture,
    "host-generator-object-in-capture": host_generator_object_in_capture,
}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not torch.cuda.is_available():
        print("capture_facts: needs a CUDA device", file=sys.stderr)
        return 2
    if argv[:1] == ["--fact"]:  # one fact in this process
        name = argv[1]
        common = {"torch": torch.__version__, "device": torch.cuda.get_device_name()}
        print(json.dumps({**_fact(name, FACTS[name]), **common}), flush=True)
        return 0
    # Each fact in a process of its own: a failed capture can leave the CUDA context unusable.
    for name in FACTS:
        subprocess.run([sys.executable, __file__, "--fact", name], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
