"""Subclinical mastitis screening at the milking robot.

Per-quarter electrical conductivity, yield, flow rate, milk colour and
temperature over the last ten milkings give a quarter-level probability and an
embedding; a cow-level model combines the four quarters with the monthly SCC
test and parity. Both forwards are compiled with mode="max-autotune" for the
robot's edge GPU; the weekly herd review uses a no-cudagraphs build.
"""
import logging

import torch
import torch.nn as nn

log = logging.getLogger("mastitis")
N_FEAT, N_MILK, EMB = 7, 10, 64


class QuarterNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(N_FEAT, EMB, batch_first=True)
        self.out = nn.Linear(EMB, 1)

    def forward(self, x):                                  # x: [B, 4, N_MILK, N_FEAT]
        b = x.shape[0]
        _, h = self.gru(x.flatten(0, 1))
        emb = h[-1].view(b, 4, EMB)
        logit = self.out(emb).squeeze(-1)
        cond = x[..., -3:, 0].mean(-1)                     # recent conductivity per quarter
        ratio = cond.amax(1) / cond.amin(1).clamp_min(1e-3)
        if ratio.max() > 1.25:  # HAZARD: dynamic-control-flow
            logit = logit + 0.5 * (ratio.unsqueeze(1) > 1.25)
        log.info("max inter-quarter conductivity ratio %.2f", ratio.max())  # HAZARD: host-code
        return emb, logit


class CowNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(4 * EMB + 2, 128), nn.ReLU(), nn.Linear(128, 1))
        self.last_worst = 0.0

    def forward(self, emb, log_scc, parity):
        z = torch.cat([emb.flatten(1), log_scc.unsqueeze(1), parity.unsqueeze(1)], 1)
        risk = torch.sigmoid(self.mlp(z)).squeeze(1)
        risk = torch.where(log_scc > 5.3, torch.maximum(risk, torch.full_like(risk, 0.6)), risk)  # CLEAN: threshold without a host branch
        self.last_worst = risk.max().item()  # HAZARD: host-sync
        return risk


def build(state=None):
    quarter, cow = QuarterNet().cuda().eval(), CowNet().cuda().eval()
    if state is not None:
        quarter.load_state_dict(state["quarter"])
        cow.load_state_dict(state["cow"])
    quarter.forward = torch.compile(quarter.forward, mode="max-autotune")
    cow.forward = torch.compile(cow.forward, mode="max-autotune")
    return quarter, cow


def build_review(state):
    quarter = QuarterNet().cuda().eval()
    quarter.load_state_dict(state["quarter"])
    quarter.forward = torch.compile(quarter.forward, mode="max-autotune-no-cudagraphs")  # CLEAN: weekly review build, no CUDA graphs
    return quarter


@torch.no_grad()
def screen(quarter, cow, milkings, log_scc, parity):
    emb, q_logit = quarter(milkings)
    q_prob = torch.sigmoid(q_logit).clone()  # CLEAN: read and cloned before the cow model runs
    risk = cow(emb.clone(), log_scc, parity)
    flagged = torch.sigmoid(q_logit) > 0.5  # HAZARD: static-address
    return q_prob.cpu(), risk.cpu(), flagged.cpu()


if __name__ == "__main__":
    quarter, cow = build()
    x = torch.rand(64, 4, N_MILK, N_FEAT, device="cuda")
    scc = torch.rand(64, device="cuda") * 3 + 3
    par = torch.randint(1, 6, (64,), device="cuda").float()
    for _ in range(3):
        q, r, f = screen(quarter, cow, x, scc, par)
    print(r[:8], f.sum().item())
