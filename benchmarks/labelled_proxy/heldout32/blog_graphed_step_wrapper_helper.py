# Blog post: "GraphedStep -- wrap any training step in a CUDA graph in one line".
# The helper warms up on a side stream and captures with optional AMP; the
# "example usage" section trains a tabular classifier on a subset of columns.
import contextlib

import torch
import torch.nn as nn
import torch.nn.functional as F


class GraphedStep:
    def __init__(self, step_fn, *static_args, warmup=3, amp_dtype=None):
        self.step_fn, self.static_args = step_fn, static_args
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())  # CLEAN: warm-up on a forked side stream
        with torch.cuda.stream(s):
            for _ in range(warmup):
                step_fn(*static_args)
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.autocast("cuda", dtype=amp_dtype or torch.float16, enabled=amp_dtype is not None):  # HAZARD: autocast-cache
            with torch.cuda.graph(self.graph):
                self.out = step_fn(*static_args)

    def __call__(self, *args):
        for s, a in zip(self.static_args, args):
            s.copy_(a)  # CLEAN: copy into the captured inputs
        self.graph.replay()
        return self.out


# ---- example usage from the post ----------------------------------------
KEEP_COLS = [0, 2, 3, 5, 7, 11, 13]
state = {"epoch": 0}
model = nn.Sequential(nn.Linear(len(KEEP_COLS), 256), nn.ReLU(), nn.Dropout(0.1), nn.Linear(256, 4)).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)


def train_step(x, y):
    torch.manual_seed(1000 + state["epoch"])  # HAZARD: rng
    logits = model(x[:, KEEP_COLS])  # HAZARD: host-sync
    loss = F.cross_entropy(logits, y)
    if loss > 10:  # HAZARD: dynamic-control-flow
        loss = loss * 0.1
    opt.zero_grad(set_to_none=False)  # CLEAN: grads zeroed in place, addresses stay fixed
    loss.backward()
    opt.step()  # HAZARD: optimizer
    return loss.detach()


x_static = torch.randn(512, 16, device="cuda")
y_static = torch.randint(0, 4, (512,), device="cuda")
step = GraphedStep(train_step, x_static, y_static, amp_dtype=torch.bfloat16)

for epoch in range(3):
    state["epoch"] = epoch  # reseed per epoch
    for _ in range(50):
        xb = torch.randn(512, 16, device="cuda")
        yb = torch.randint(0, 4, (512,), device="cuda")
        loss = step(xb, yb)
    with contextlib.suppress(RuntimeError):
        print(epoch, float(loss), "epoch seed:", 1000 + state["epoch"])  # CLEAN: host read after the replays
