"""Viewability prediction for display ad slots (>= 50% of pixels in view for >= 1 s).

The model is retrained nightly and serves bid-time requests. It is compiled once
with mode="reduce-overhead" and the compiled module is handed to both the
trainer and the bid server; the optimizer step is compiled too.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

SLOT_FEAT, PAGE_FEAT = 12, 48
SERVE_BUCKET = 256


class ViewabilityNet(nn.Module):
    def __init__(self, d=128):
        super().__init__()
        self.slot = nn.Linear(SLOT_FEAT, d)
        self.page = nn.Linear(PAGE_FEAT, d)
        self.mlp = nn.Sequential(nn.ReLU(), nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 1))

    def forward(self, slot, page):
        z = self.mlp(self.slot(slot) + self.page(page)).squeeze(-1)
        print("viewability batch", slot.shape[0])  # HAZARD: host-code
        return z


class Trainer:
    def __init__(self, cmodel, params, total_steps, lr=3e-3):
        self.cmodel = cmodel
        self.opt = torch.optim.AdamW(params, lr=lr, weight_decay=1e-5)
        self.step_fn = torch.compile(self.opt.step, mode="reduce-overhead")
        self.base_lr, self.total = lr, total_steps

    def fit(self, loader):
        for step, (slot, page, viewed) in enumerate(loader):
            logits = self.cmodel(slot, page)
            loss = F.binary_cross_entropy_with_logits(logits, viewed)
            loss.backward()
            self.step_fn()
            self.opt.zero_grad(set_to_none=True)
            lr = 0.5 * self.base_lr * (1 + math.cos(math.pi * step / self.total))
            for group in self.opt.param_groups:
                group["lr"] = lr  # HAZARD: optimizer


class BidServer:
    def __init__(self, cmodel):
        self.cmodel = cmodel

    @torch.no_grad()
    def score_request(self, slot, page):
        """One bid request: one row per ad slot on the page (1 to ~40)."""
        return torch.sigmoid(self.cmodel(slot, page))  # HAZARD: dynamic-shape

    @torch.no_grad()
    def score_padded(self, slot, page):
        n = slot.shape[0]
        slot_p = F.pad(slot, (0, 0, 0, SERVE_BUCKET - n))
        page_p = F.pad(page, (0, 0, 0, SERVE_BUCKET - n))
        return torch.sigmoid(self.cmodel(slot_p, page_p))[:n].clone()  # CLEAN: padded to one bucket and cloned

    @torch.no_grad()
    def backfill(self, chunks):
        """Re-score yesterday's log in 256-row chunks for the reporting table."""
        scores = []
        for slot, page in chunks:
            scores.append(self.cmodel(slot, page))  # HAZARD: static-address
        return torch.sigmoid(torch.cat(scores))

    @torch.no_grad()
    def backfill_safe(self, chunks):
        return torch.cat([self.cmodel(s, p).clone() for s, p in chunks])  # CLEAN: each output cloned before the next call


@torch.no_grad()
def offline_auc(net, slot, page, viewed):
    eval_model = torch.compile(net)
    logits = eval_model(slot, page)  # CLEAN: default torch.compile (no CUDA graphs) on the full day
    order = torch.argsort(logits, descending=True)
    hits = viewed[order].cumsum(0)
    return (hits[viewed[order] == 0].sum() / (viewed.sum() * (1 - viewed).sum())).item()


if __name__ == "__main__":
    net = ViewabilityNet().cuda()
    cmodel = torch.compile(net, mode="reduce-overhead")
    data = torch.load("viewability_nightly.pt")
    loader = torch.utils.data.DataLoader(data, batch_size=4096, shuffle=True, drop_last=True)
    Trainer(cmodel, net.parameters(), total_steps=len(loader)).fit(loader)
    server = BidServer(cmodel)
