"""Which captures need a warm-up run before them, measured on a GPU (torch 2.11).

CG508 reports a manual capture that runs a module, a backward or an optimizer step with no warm-up
before it. The labelled sets also mark captures of plain tensor code with no warm-up. This probe
captures each kind of work cold, in a fresh process (so no library handle, workspace or kernel was
created before), and records whether the capture succeeds and whether a replay matches eager.

Cases: elementwise only; a matmul (cuBLAS); `F.linear`; an `nn.Linear` forward; a convolution
(cuDNN); `torch.linalg.solve` (cuSOLVER); a GRU forward; fwd+bwd of an MLP. Each prints one JSON line.

Run: python benchmarks/cold_capture.py  (needs a CUDA GPU)
"""

from __future__ import annotations

import json
import subprocess
import sys

CASES = ("elementwise", "matmul", "linear_fn", "linear_module", "conv2d", "linalg_solve", "gru", "mlp_fwd_bwd")


def build(case: str):
    """The inputs and the work to capture for one case: ``(inputs, fn)``, ``fn(*inputs) -> tensor``."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    x = torch.randn(64, 256, device="cuda")
    if case == "elementwise":
        return (x,), lambda a: (a * 2 + 1).relu()
    if case == "matmul":
        w = torch.randn(256, 256, device="cuda")
        return (x, w), lambda a, b: a @ b
    if case == "linear_fn":
        w = torch.randn(128, 256, device="cuda")
        return (x, w), lambda a, b: F.linear(a, b)
    if case == "linear_module":
        lin = nn.Linear(256, 128).cuda()
        return (x,), lambda a: lin(a)
    if case == "conv2d":
        conv = nn.Conv2d(3, 16, 3, padding=1).cuda()
        img = torch.randn(8, 3, 64, 64, device="cuda")
        return (img,), lambda a: conv(a)
    if case == "linalg_solve":
        m = torch.randn(16, 8, 8, device="cuda") + 8 * torch.eye(8, device="cuda")
        rhs = torch.randn(16, 8, 1, device="cuda")
        return (m, rhs), lambda a, b: torch.linalg.solve(a, b)
    if case == "gru":
        gru = nn.GRU(256, 128, batch_first=True).cuda()
        seq = torch.randn(8, 20, 256, device="cuda")
        return (seq,), lambda a: gru(a)[0]
    if case == "mlp_fwd_bwd":
        mlp = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1)).cuda()

        def step(a):
            loss = mlp(a).sum()
            loss.backward()
            return loss.detach()
        return (x,), step
    raise ValueError(case)


def run_case(case: str) -> dict:
    """Capture ``case`` with no warm-up (fresh process), replay it on new inputs, compare with eager."""
    import torch

    inputs, fn = build(case)
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            out = fn(*inputs)
    except Exception as exc:  # noqa: BLE001 - the point is to record what is raised
        return {"case": case, "captured": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:240]}"}
    try:
        for t in inputs:  # new values in the same buffers (a linear system stays solvable)
            t.mul_(0.5)
        g.replay()
        torch.cuda.synchronize()
        if case == "mlp_fwd_bwd":
            return {"case": case, "captured": True, "replayed": True, "matches_eager": None}
        expected = fn(*inputs)
        match = bool(torch.allclose(out, expected, rtol=1e-3, atol=1e-3))
    except Exception as exc:  # noqa: BLE001
        return {"case": case, "captured": True, "replayed": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:240]}"}
    return {"case": case, "captured": True, "replayed": True, "matches_eager": match}


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--case":
        print(json.dumps(run_case(sys.argv[2])), flush=True)
        return
    import torch
    print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name()}), flush=True)
    for case in CASES:  # one fresh process per case: nothing ran on the GPU before its capture
        done = subprocess.run([sys.executable, __file__, "--case", case], capture_output=True, text=True, timeout=300)
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        print(lines[-1] if lines else json.dumps({"case": case, "exit": done.returncode,
                                                  "stderr": done.stderr.strip().splitlines()[-1:]}), flush=True)


if __name__ == "__main__":
    main()
