"""Departure-delay prediction for a hub airport's operations centre.

Each flight is a feature vector (schedule, aircraft rotation, crew connection, weather at
origin / destination); an airport-graph encoder adds network congestion. The model, the summary
function and the optimizer step are compiled with the options in COMPILE_KW.
"""
import logging
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("ops.delay")
COMPILE_KW = dict(mode="reduce-overhead", dynamic=False)
N_AIRPORTS, N_FEAT, BATCH = 300, 40, 1024


class DelayNet(nn.Module):
    def __init__(self, hid=128):
        super().__init__()
        self.ap_emb = nn.Embedding(N_AIRPORTS, hid)
        self.register_buffer("adj", torch.eye(N_AIRPORTS))
        self.gnn = nn.Linear(hid, hid)
        self.mlp = nn.Sequential(nn.Linear(N_FEAT + 2 * hid, 256), nn.ReLU(), nn.Linear(256, 3))   # mean, log-scale, p(cancel)

    def forward(self, feats, org, dst):
        ap = F.relu(self.gnn(self.adj @ self.ap_emb.weight))
        h = torch.cat([feats, ap[org], ap[dst]], -1)
        out = self.mlp(h)
        return out[:, 0], out[:, 1].exp(), torch.sigmoid(out[:, 2])


def nll(mu, scale, p_cancel, delay, cancelled):
    lap = torch.abs(delay - mu) / scale + torch.log(2 * scale)
    return (torch.where(cancelled, -torch.log(p_cancel + 1e-6), lap - torch.log1p(-p_cancel + 1e-6))).mean()


def summarize(mu, p_cancel):
    late = (mu > 15.0).float().mean()
    log.warning("forecast bank: %.1f%% flights late", 100 * late)  # HAZARD: host-code
    return mu.mean().item(), late  # HAZARD: host-sync


class DelayService:
    def __init__(self, model, lr=3e-3):
        self.model = model.cuda()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.fwd = torch.compile(self.model, **COMPILE_KW)
        self.loss = torch.compile(nll, **COMPILE_KW)
        self.step = torch.compile(self.opt.step, **COMPILE_KW)
        self.summary = torch.compile(summarize, **COMPILE_KW)

    def train_epoch(self, loader, epoch):
        if epoch in (10, 20):
            self.opt.param_groups[0]["lr"] *= 0.5  # HAZARD: optimizer
        for feats, org, dst, delay, cancelled in loader:
            loss = self.loss(*self.fwd(feats, org, dst), delay, cancelled)
            value = float(loss)  # CLEAN: loss read before backward, outside the compiled functions
            loss.backward()
            self.step()
            self.opt.zero_grad(set_to_none=True)
        return value

    @torch.no_grad()
    def forecast_bank(self, feats, org, dst):
        n = feats.shape[0]
        pad = BATCH - n
        f = F.pad(feats, (0, 0, 0, pad))  # CLEAN: departure bank padded to the compiled batch size
        mu, scale, pc = self.fwd(f, F.pad(org, (0, pad)), F.pad(dst, (0, pad)))
        return mu[:n].clone(), pc[:n].clone()  # CLEAN: outputs cloned right after the call

    @torch.no_grad()
    def whatif(self, feats, org, dst):
        mu, _, pc = self.fwd(feats, org, dst)  # HAZARD: dynamic-shape
        return self.summary(mu.clone(), pc.clone())


if __name__ == "__main__":
    svc = DelayService(DelayNet())
    rnd = lambda n: (torch.randn(n, N_FEAT, device="cuda"), torch.randint(0, N_AIRPORTS, (n,), device="cuda"),
                     torch.randint(0, N_AIRPORTS, (n,), device="cuda"))
    data = [(*rnd(BATCH), torch.randn(BATCH, device="cuda") * 20, torch.rand(BATCH, device="cuda") < 0.02) for _ in range(30)]
    for epoch in range(30):
        svc.train_epoch(data, epoch)
    mu, pc = svc.forecast_bank(*rnd(731))
    for n in (37, 112, 405):                                     # dispatcher what-if scenarios of any size
        print(svc.whatif(*rnd(n)))
