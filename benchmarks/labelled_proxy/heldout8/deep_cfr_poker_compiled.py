"""Deep CFR advantage network for heads-up no-limit hold'em.

Traversals write (infoset, sampled advantages, CFR iteration) into a reservoir
memory; the advantage net is re-fit on it after every CFR iteration with a
linear-CFR weighted MSE.  Strategy and loss are built as compiled closures.
"""
import numpy as np
import torch
import torch.nn as nn

CG = {"triton.cudagraphs": True}
N_INFO, N_ACT = 512, 8


class AdvantageNet(nn.Module):
    def __init__(self, h=512):
        super().__init__()
        self.card_emb = nn.Linear(N_INFO, h)
        self.trunk = nn.Sequential(nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU())
        self.norm = nn.LayerNorm(h)
        self.head = nn.Linear(h, N_ACT)

    def forward(self, info):
        return self.head(self.norm(self.trunk(self.card_emb(info))))


class Reservoir:
    def __init__(self, cap=2_000_000):
        self.cap, self.n = cap, 0
        self.info = torch.empty(cap, N_INFO, device="cuda")
        self.adv = torch.empty(cap, N_ACT, device="cuda")
        self.it = torch.empty(cap, device="cuda")

    def __len__(self):
        return min(self.n, self.cap)

    def sample(self, k):
        idx = torch.randint(0, len(self), (k,), device="cuda")
        return self.info[idx], self.adv[idx], self.it[idx]


def build_solver(net, explore=0.06, lr=1e-3, batch=32_768):
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    stats = {}

    @torch.compile(options=CG)
    def strategy(info, legal):
        adv = net(info).clamp(min=0) * legal
        total = adv.sum(-1, keepdim=True)
        uniform = legal / legal.sum(-1, keepdim=True)
        sigma = torch.where(total > 0, adv / total.clamp(min=1e-9), uniform)  # CLEAN: regret matching without a branch
        eps = np.random.uniform(0.0, explore)  # HAZARD: host-code
        return (1 - eps) * sigma + eps * uniform

    @torch.compile(options=CG)
    def weighted_loss(info, adv, iters):
        pred = net(info)
        stats["max_adv"] = adv.abs().max().item()  # HAZARD: host-sync
        return (iters.unsqueeze(-1) * (pred - adv) ** 2).sum() / iters.sum()

    compiled_step = torch.compile(opt.step, options=CG)

    @torch.compile
    def probe_loss(info, adv, iters):
        return ((net(info) - adv) ** 2).mean().item()  # CLEAN: default torch.compile, no CUDA graphs

    def refit(memory, cfr_iter, sgd_steps=4000):
        for s in range(sgd_steps):
            n = min(batch, len(memory))
            info, adv, iters = memory.sample(n)
            loss = weighted_loss(info, adv, iters)  # HAZARD: dynamic-shape
            loss.backward()
            compiled_step()
            opt.zero_grad(set_to_none=True)
            for g in opt.param_groups:
                g["lr"] = lr * (1.0 - s / sgd_steps)  # HAZARD: optimizer
        return probe_loss(*memory.sample(4096))

    return strategy, refit, stats


def run(n_iters=100, traversals=5_000):
    net = AdvantageNet().cuda()
    memory = Reservoir()
    strategy, refit, stats = build_solver(net)
    for t in range(1, n_iters + 1):
        for _ in range(traversals // 1000):
            info = torch.randn(1000, N_INFO, device="cuda")
            legal = (torch.rand(1000, N_ACT, device="cuda") > 0.3).float()
            legal[:, 0] = 1.0
            with torch.no_grad():
                sigma = strategy(info, legal)
                sampled = torch.multinomial(sigma, 1).squeeze(-1)
            adv = torch.randn(1000, N_ACT, device="cuda") * legal
            lo = memory.n % memory.cap
            hi = min(lo + 1000, memory.cap)
            memory.info[lo:hi] = info[: hi - lo]
            memory.adv[lo:hi] = adv[: hi - lo]
            memory.it[lo:hi] = float(t)
            memory.n += hi - lo
        print(t, refit(memory, t), stats.get("max_adv"))


if __name__ == "__main__":
    run()
