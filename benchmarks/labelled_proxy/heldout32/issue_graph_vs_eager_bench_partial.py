# Issue: "CUDA graph replay is not faster than eager for small ops?" The
# reporter's benchmark harness: cases are functools.partial objects, each one
# captured once and then replayed. Numbers for the alpha sweep looked
# suspiciously identical, and two cases crash at capture.
import functools

import torch
import torch.nn.functional as F

dev = "cuda"
CFG = {"alpha": 1.0}
SIDE = torch.cuda.Stream()


def capture(fn, amp=False):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())  # CLEAN: warm-up stream forked from the caller
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    if amp:
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            with torch.cuda.graph(g):
                out = fn()
    else:
        with torch.cuda.graph(g):
            out = fn()
    return g, out


def time_replays(g, iters=500):
    torch.cuda.synchronize()  # CLEAN: sync outside any capture
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        g.replay()
    end.record()
    torch.cuda.synchronize()
    return 1e3 * start.elapsed_time(end) / iters


def case_mlp(x, w1, w2):
    return F.gelu(x @ w1) @ w2  # CLEAN: device work only


def case_scaled(x, w1):
    return torch.tanh(x @ w1) * CFG["alpha"]  # HAZARD: python-scalar


def case_debug(x, w1):
    y = x @ w1
    torch.cuda.synchronize()  # HAZARD: host-sync
    return y


def case_overlap(x, w1, w2):
    with torch.cuda.stream(SIDE):  # HAZARD: stream
        a = x @ w1
    b = x @ w2
    return a + b


x = torch.randn(64, 1024, device=dev)
w1 = torch.randn(1024, 1024, device=dev, requires_grad=True)
w2 = torch.randn(1024, 1024, device=dev)
cases = {
    "mlp": functools.partial(case_mlp, x, w1, w2),
    "mlp_amp": functools.partial(case_mlp, x, w1, w2),
    "debug": functools.partial(case_debug, x, w1),
    "overlap": functools.partial(case_overlap, x, w1, w2),
}
for name, fn in cases.items():
    try:
        g, _ = capture(fn, amp=name.endswith("_amp"))
        print(f"{name:8s} {time_replays(g):8.2f} us/replay")
    except RuntimeError as e:
        print(f"{name:8s} capture failed: {str(e).splitlines()[0]}")

g, out = capture(functools.partial(case_scaled, x, w1))
for alpha in (0.5, 1.0, 2.0):
    CFG["alpha"] = alpha
    t = time_replays(g, iters=50)
    print(f"alpha={alpha}: {t:.2f} us, out.sum()={out.sum().item():.3f}")  # CLEAN: host read after the timed replays
