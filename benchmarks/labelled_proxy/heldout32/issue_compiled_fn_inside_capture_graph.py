# Calling a torch.compile'd module inside torch.cuda.graph: the very first
# capture fails with a CPU->GPU copy error (pytorch#185074; Inductor compiles
# and does host bookkeeping mid-capture). Only the head was warmed up because
# "the MLP is compiled anyway". The bf16 version also differs from eager.
import os

import torch
import torch._dynamo
import torch.nn as nn

os.environ.setdefault("TORCH_LOGS", "graph_breaks")
torch._dynamo.config.cache_size_limit = 16
dev = "cuda"

mlp = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256)).to(dev)
head = nn.Linear(256, 10).to(dev)
fused_mlp = torch.compile(mlp)  # default mode, no CUDA graphs of its own
fused_head = torch.compile(head, mode="max-autotune-no-cudagraphs")  # CLEAN: no CUDA graphs of its own

alpha = 0.5
static_x = torch.randn(64, 256, device=dev)


def body(x):
    h = fused_mlp(x)  # HAZARD: api-misuse
    h = h * alpha  # HAZARD: python-scalar
    mix = torch.tensor([0.25, 0.75], device=x.device)  # HAZARD: host-sync
    return fused_head(mix[0] * h + mix[1] * x)  # CLEAN: fused_head was warmed up before the capture


with torch.no_grad():
    for _ in range(3):
        fused_head(static_x)  # warm-up: the head only
    g = torch.cuda.CUDAGraph()
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        with torch.cuda.graph(g):
            static_y = body(static_x)

alpha = 0.9
g.replay()
print("graph:", static_y.float()[0, :4])
print("eager:", head(0.25 * mlp(static_x) * alpha + 0.75 * static_x)[0, :4])


# the version that works for me
def body_fixed(x):
    with torch.autocast("cuda", dtype=torch.bfloat16):  # CLEAN: autocast entered inside the captured function
        return fused_head(fused_mlp(x) + x)


with torch.no_grad():
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            body_fixed(static_x)
    torch.cuda.current_stream().wait_stream(s)
    g2 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g2):
        static_y2 = body_fixed(static_x)  # CLEAN: every compiled path ran before the capture
g2.replay()
print("fixed:", static_y2.float()[0, :4])
