"""DeepSurv (Cox proportional hazards) on a SUPPORT-style ICU cohort.

Biostatistics group code: lifelines for the baseline, pandas for the cohort, torch
for the risk network.  The risk net is graphed with make_graphed_callables; the
Cox partial likelihood (sorting by time) stays eager.
"""
import numpy as np
import pandas as pd
import torch
import torch.nn as nn
from lifelines.utils import concordance_index

dev = "cuda"
cohort = pd.read_csv("support_cohort.csv")
COVS = ["age", "sex", "race", "num_co", "diabetes", "dementia", "ca", "meanbp", "hr", "resp", "temp", "wbc", "sod", "crea"]
cohort[COVS] = (cohort[COVS] - cohort[COVS].mean()) / cohort[COVS].std()
STRATA_W = cohort.groupby("site").size().pipe(lambda s: (s.max() / s).tolist())
N_SITES = len(STRATA_W)


class RiskNet(nn.Module):
    def __init__(self, d, n_sites, strata_weights, p=0.2):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d, 64), nn.SELU(), nn.Linear(64, 64), nn.SELU())
        self.out = nn.Linear(64, 1, bias=False)
        self.site_emb = nn.Embedding(n_sites, 64)
        self.strata_weights = strata_weights
        self.p = p
        self.drop_gen = torch.Generator(device=dev)
        self.drop_gen.manual_seed(2)

    def forward(self, x, site):
        h = self.body(x) + self.site_emb(site)  # CLEAN: embedding lookup with a CUDA index tensor
        keep = torch.bernoulli(torch.full_like(h, 1 - self.p), generator=self.drop_gen)  # HAZARD: rng
        h = h * keep / (1 - self.p)
        w = torch.tensor(self.strata_weights, device=x.device)  # HAZARD: host-sync
        return self.out(h).squeeze(-1) + torch.log(w[site])


def cox_ph_loss(risk, time, event):
    order = torch.argsort(time, descending=True)
    r, e = risk[order], event[order]
    log_cum = torch.logcumsumexp(r, dim=0)  # CLEAN: eager loss, outside the graph
    return -((r - log_cum) * e).sum() / e.sum().clamp_min(1.0)


net = RiskNet(len(COVS), N_SITES, STRATA_W).to(dev)
net.register_full_backward_hook(lambda m, gi, go: None)  # HAZARD: api-misuse

B = 512
sx = torch.randn(B, len(COVS), device=dev)
ss = torch.randint(0, N_SITES, (B,), device=dev)
with torch.autocast(device_type="cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
    g_net = torch.cuda.make_graphed_callables(net, (sx, ss))
net.out.register_forward_hook(lambda m, i, o: None)  # CLEAN: registered after graphing
opt = torch.optim.Adam(net.parameters(), lr=1e-3, weight_decay=1e-4)

X = torch.tensor(cohort[COVS].to_numpy(np.float32))
S = torch.tensor(cohort["site"].to_numpy(np.int64))
T = torch.tensor(cohort["d.time"].to_numpy(np.float32))
E = torch.tensor(cohort["death"].to_numpy(np.float32))

for epoch in range(100):
    perm = torch.randperm(len(X))
    for i in range(0, len(X) - B + 1, B):
        idx = perm[i:i + B]
        risk = g_net(X[idx].to(dev), S[idx].to(dev))
        loss = cox_ph_loss(risk, T[idx].to(dev), E[idx].to(dev))
        opt.zero_grad()
        loss.backward()
        opt.step()

net.eval()
with torch.no_grad():
    r = net(X.to(dev), S.to(dev)).cpu().numpy()
print("C-index", concordance_index(T.numpy(), -r, E.numpy()))
