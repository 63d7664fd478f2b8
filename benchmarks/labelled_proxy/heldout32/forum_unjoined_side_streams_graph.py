# Forum: overlapping three branches inside a captured forward.
#   capture #1: "CUDA error: capturing stream has unjoined work"
#   capture #2 (after I added the joins): "operation not permitted when stream
#   is capturing" / "dependency created on uncaptured work in another stream"
# Branch b was written by the docs' fork/join recipe and seems fine.
import torch
import torch.nn as nn


class ThreeBranch(nn.Module):
    def __init__(self, d=1024):
        super().__init__()
        self.a = nn.Linear(d, d)
        self.b = nn.Linear(d, d)
        self.c = nn.Linear(d, d)
        self.s_b = torch.cuda.Stream()
        self.s_c = torch.cuda.Stream()
        self.s_log = torch.cuda.Stream()
        self.snapshot = torch.zeros(d, device="cuda")

    def forward(self, x):
        cur = torch.cuda.current_stream()
        self.s_b.wait_stream(cur)
        with torch.cuda.stream(self.s_b):  # CLEAN: forked from the capture stream and joined below
            yb = self.b(x)
        with torch.cuda.stream(self.s_c):  # HAZARD: stream
            yc = self.c(x)
        ya = self.a(x)
        cur.wait_stream(self.s_b)  # CLEAN: joins the forked branch back into the capture stream
        cur.wait_stream(self.s_c)
        self.s_log.wait_stream(cur)
        with torch.cuda.stream(self.s_log):  # HAZARD: stream
            self.snapshot.copy_(ya.mean(0))
        cur.synchronize()  # HAZARD: host-sync
        out = ya + yb + yc
        if (out.abs() > 50).any():  # HAZARD: dynamic-control-flow
            out = out.clamp(-50, 50)
        return out


model = ThreeBranch().cuda().eval()
static_x = torch.randn(256, 1024, device="cuda")

side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.no_grad(), torch.cuda.stream(side):  # CLEAN: warm-up outside the capture, forked from the default stream
    for _ in range(3):
        model(static_x)
torch.cuda.current_stream().wait_stream(side)

g = torch.cuda.CUDAGraph()
with torch.no_grad(), torch.cuda.graph(g):
    static_out = model(static_x)

for i in range(4):
    static_x.normal_()  # CLEAN: refills the captured input in place
    g.replay()
    print(i, static_out.norm().item(), model.snapshot[:2].tolist())
