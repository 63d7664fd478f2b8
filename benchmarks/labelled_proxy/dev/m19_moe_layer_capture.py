"""Mixture-of-experts FFN captured with torch.cuda.graph for a fixed token count."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class TopKMoE(nn.Module):
    def __init__(self, dim=1024, n_experts=8, k=2, capacity_factor=1.25, dispatch="dropless"):
        super().__init__()
        self.k, self.n_experts = k, n_experts
        self.capacity_factor = capacity_factor
        self.dispatch = dispatch
        self.router = nn.Linear(dim, n_experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(n_experts, dim, 4 * dim) * 0.02)
        self.w2 = nn.Parameter(torch.randn(n_experts, 4 * dim, dim) * 0.02)

    def forward(self, x):
        probs = F.softmax(self.router(x), dim=-1)
        topv, topi = probs.topk(self.k, dim=-1)
        if self.dispatch == "dropless":  # CLEAN: config string, constant across replays
            return self._dropless(x, topv, topi)
        return self._capacity(x, topv, topi)

    def _dropless(self, x, topv, topi):
        active = torch.unique(topi)  # HAZARD: dynamic-shape
        counts = torch.bincount(topi.flatten(), minlength=self.n_experts)  # HAZARD: dynamic-shape
        splits = counts.tolist()  # HAZARD: host-sync
        order = topi.flatten().argsort()
        xs = x.repeat_interleave(self.k, dim=0)[order].split(splits)
        outs = [F.gelu(chunk @ self.w1[e]) @ self.w2[e] for e, chunk in zip(active.tolist(), xs)]  # HAZARD: host-sync
        y = torch.cat(outs)
        return y.new_zeros(y.shape).index_copy_(0, order, y).view(-1, self.k, x.shape[-1]).mul(topv[..., None]).sum(1)

    def _capacity(self, x, topv, topi):
        cap = int(self.capacity_factor * x.shape[0] * self.k / self.n_experts)  # CLEAN: int() of shapes and config floats, no tensor read
        onehot = F.one_hot(topi, self.n_experts).float()
        pos = onehot.flatten(0, 1).cumsum(0).view_as(onehot) * onehot
        keep = (pos <= cap) & (onehot > 0)
        gate = (topv[..., None] * keep).sum(1)
        h = torch.einsum("td,edf->tef", x, self.w1)
        return torch.einsum("tef,efd,te->td", F.gelu(h), self.w2, gate)


def capture_moe(moe, tokens=2048, dim=1024):
    x = torch.randn(tokens, dim, device="cuda", dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(3):
            moe(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g):
        y = moe(x)
    return g, x, y


if __name__ == "__main__":
    moe = TopKMoE().cuda().to(torch.bfloat16)
    g, x, y = capture_moe(moe)
    g.replay()
