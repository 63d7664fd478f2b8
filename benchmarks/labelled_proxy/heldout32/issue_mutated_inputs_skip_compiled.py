# "skipping cudagraphs due to mutated inputs (1 instances)" -- which input?
# (pytorch#117281; newer versions print the stack trace, PR #124700). Reduced
# from a streaming tagger with a rolling window, compiled with
# options={"triton.cudagraphs": True}. After fixing the mutation the
# streaming path still recompiles and breaks the graph.
import torch
import torch.nn as nn

CG = {"triton.cudagraphs": True}
D, WIN = 256, 64


@torch.compile(options=CG)
def roll_window_(window, h):
    window[:-1] = window[1:].clone()  # HAZARD: static-address
    window[-1] = h
    return window


@torch.compile(options=CG)
def roll_window(window, h):
    return torch.cat([window[1:], h.unsqueeze(0)])  # CLEAN: out-of-place twin


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(D, D)
        self.register_buffer("state", torch.zeros(D))
        self.decay = 0.9

    def forward(self, x):
        h = self.proj(x)
        d = self.decay  # HAZARD: python-scalar
        self.state.mul_(d).add_((1 - d) * h.mean(0))  # CLEAN: in-place update of a registered buffer
        if (h.abs() > 6).any():  # HAZARD: dynamic-control-flow
            h = h.clamp(-6, 6)
        hot = torch.where(h.abs().amax(1) > 3.0)[0]  # HAZARD: dynamic-shape
        return h + self.state, hot


tagger = Tagger().cuda().eval()
ctagger = torch.compile(tagger, options=CG)
window = torch.zeros(WIN, D, device="cuda")
scratch = torch.zeros(WIN, D, device="cuda")  # legacy buffer still fed to roll_window_
with torch.no_grad():
    for epoch in range(3):
        tagger.decay = 0.9 + 0.03 * epoch  # smoother state in later epochs
        tagger.state.zero_()  # CLEAN: reset in place, the buffer keeps its address
        for t in range(50):
            x = torch.randn(32, D, device="cuda")
            out, hot = ctagger(x)
            n_hot = hot.numel()
            summary = out.mean(0)  # CLEAN: read right after the producing call
            window = roll_window(window, summary).clone()  # CLEAN: cloned before it is fed back in
            roll_window_(scratch, summary)
        print(epoch, "hot rows in last chunk:", n_hot, "window norm", window.norm().item())
