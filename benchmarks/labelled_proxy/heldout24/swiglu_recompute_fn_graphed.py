"""Memory-lean SwiGLU feed-forward with recompute-in-backward, graphed per block.

The autograd Function keeps only its inputs and recomputes the gate in backward,
which halves activation memory for the 8k-context fine-tune.  Each FFN block is
wrapped with torch.cuda.make_graphed_callables so forward and backward replay.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SwiGLURecompute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w_gate, w_up, clamp_val):
        g = x @ w_gate.t()
        u = x @ w_up.t()
        out = F.silu(g) * u
        out = torch.where(out.abs() > clamp_val, out.sign() * clamp_val, out)  # CLEAN: device-side clamp
        ctx.save_for_backward(x, w_gate, w_up)
        return out

    @staticmethod
    def backward(ctx, gout):
        x, w_gate, w_up = ctx.saved_tensors
        g = x @ w_gate.t()
        u = x @ w_up.t()
        sg = torch.sigmoid(g)
        silu = g * sg
        d_u = gout * silu
        d_g = gout * u * (sg * (1 + g * (1 - sg)))
        if torch.isnan(d_g).any():  # HAZARD: dynamic-control-flow
            d_g = torch.nan_to_num(d_g)
        dx = d_g @ w_gate + d_u @ w_up
        return dx, d_g.flatten(0, -2).t() @ x.flatten(0, -2), d_u.flatten(0, -2).t() @ x.flatten(0, -2), None


class FFNBlock(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.w_gate = nn.Parameter(torch.randn(hidden, d) * d ** -0.5)
        self.w_up = nn.Parameter(torch.randn(hidden, d) * d ** -0.5)
        self.down = nn.Linear(hidden, d, bias=False)
        self.clamp_val = 30.0
        self.residual_scale = 1.0

    def forward(self, x):
        h = SwiGLURecompute.apply(self.norm(x), self.w_gate, self.w_up, self.clamp_val)
        return x + self.residual_scale * self.down(h)  # HAZARD: python-scalar


def build(depth=8, d=2048, hidden=5632, tokens=8192):
    blocks = [FFNBlock(d, hidden).cuda() for _ in range(depth)]
    act_stats = {}

    def _track(name):
        def hook(mod, inp, out):
            act_stats[name] = out.detach().abs().amax()
        return hook

    for i, b in enumerate(blocks):
        b.register_forward_hook(_track(f"ffn{i}"))  # HAZARD: api-misuse
    samples = [(torch.randn(tokens, d, device="cuda", requires_grad=True),) for _ in blocks]
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        graphed = torch.cuda.make_graphed_callables(tuple(blocks), tuple(samples))
    return blocks, list(graphed), act_stats


def train(loader, steps=1000):
    blocks, graphed, stats = build()
    params = [p for b in blocks for p in b.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-4, fused=True)
    for step, (x, target) in zip(range(steps), loader):
        x = x.cuda(non_blocking=True)  # CLEAN: eager H2D copy, outside any graph
        h = x.requires_grad_()
        for g in graphed:
            h = g(h)
        loss = F.mse_loss(h.float(), target.cuda())
        loss.backward()
        opt.step()  # CLEAN: eager optimizer step, not captured
        opt.zero_grad(set_to_none=True)
        if step % 100 == 0:
            print(step, loss.item())  # CLEAN: eager, outside the graphs
        for b in blocks:
            b.residual_scale = min(1.0, 0.1 + step / 2000)


@torch.no_grad()
def eval_step(graphed, x):
    h = x
    for g in graphed:
        h = g(x=h)  # HAZARD: api-misuse
    return h
