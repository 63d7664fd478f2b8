"""Suggested max-CPC bids for newly added search-ads keywords.

A keyword tower (hashed n-grams) and an advertiser tower predict CTR, CVR and
expected CPC; the suggested bid is trained against realised value per click
under the advertiser's budget pressure. Loss and optimizer steps are compiled
with CUDA graphs through the inductor option dict.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CG = {"triton.cudagraphs": True}
N_HASH, N_ADV_FEAT, D = 2 ** 18, 32, 64


class BidModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.kw = nn.EmbeddingBag(N_HASH, D, mode="mean")
        self.adv = nn.Sequential(nn.Linear(N_ADV_FEAT, D), nn.ReLU())
        self.trunk = nn.Sequential(nn.Linear(2 * D, 128), nn.ReLU())
        self.head = nn.Linear(128, 3)

    def forward(self, kw_hashes, adv_feats):
        z = self.trunk(torch.cat([self.kw(kw_hashes), self.adv(adv_feats)], -1))
        ctr, cvr, cpc = self.head(z).unbind(-1)
        return torch.sigmoid(ctr), torch.sigmoid(cvr), F.softplus(cpc)


class BidTrainer:
    def __init__(self, model: BidModel):
        self.model = model.cuda()
        self.budget_scale = 1.0                # per-advertiser budget pressure
        self.explore = 0.05
        self.opt = torch.optim.AdamW(self.model.trunk.parameters(), lr=1e-3, weight_decay=0.01)
        self.sched = torch.optim.lr_scheduler.StepLR(self.opt, step_size=2000, gamma=0.5)
        lr_t = torch.tensor(3e-3, device="cuda")
        self.emb_opt = torch.optim.Adam([*self.model.kw.parameters(), *self.model.adv.parameters(),
                                         *self.model.head.parameters()], lr=lr_t, capturable=True)
        self.loss_fn = torch.compile(self._loss, options=CG)
        self.opt_step = torch.compile(self.opt.step, options=CG)
        self.emb_step = torch.compile(self.emb_opt.step, options=CG)

    def _loss(self, kw, adv, clicks, convs, value):
        ctr, cvr, cpc = self.model(kw, adv)
        noise = np.random.normal(0.0, self.explore)  # HAZARD: host-code
        pressure = self.budget_scale  # HAZARD: python-scalar
        bid = cpc * (1.0 + noise) / pressure
        roi_gap = F.smooth_l1_loss(bid * ctr, value * cvr * ctr)
        return F.binary_cross_entropy(ctr, clicks) + F.binary_cross_entropy(cvr, convs) + roi_gap

    def train_step(self, batch):
        loss = self.loss_fn(*batch)
        loss_val = loss.detach().clone()  # CLEAN: cloned while the backward is still pending
        loss.backward()
        self.opt_step()
        self.emb_step()
        self.opt.zero_grad(set_to_none=True)
        self.emb_opt.zero_grad(set_to_none=True)
        self.sched.step()  # HAZARD: optimizer
        return loss_val

    def set_embedding_lr(self, lr: float):
        self.emb_opt.param_groups[0]["lr"].fill_(lr)  # CLEAN: tensor LR updated in place, no recompile

    def freeze_regularisation(self):
        for g in self.opt.param_groups:
            g["weight_decay"] = 0.0  # HAZARD: optimizer


def fit(trainer: BidTrainer, advertisers, steps_per_adv: int = 500):
    log = []
    for adv in advertisers:
        trainer.budget_scale = adv["budget_pressure"]
        for step in range(steps_per_adv):
            log.append(trainer.train_step(adv["batch_fn"](step)))
        trainer.set_embedding_lr(3e-3 * 0.9 ** len(log))
    trainer.freeze_regularisation()
    return torch.stack(log).cpu()


if __name__ == "__main__":
    def batch_fn(step, b=4096):
        return (torch.randint(0, N_HASH, (b, 6), device="cuda"), torch.randn(b, N_ADV_FEAT, device="cuda"),
                torch.rand(b, device="cuda").round(), torch.rand(b, device="cuda").round(),
                torch.rand(b, device="cuda") * 2)
    advs = [{"budget_pressure": p, "batch_fn": batch_fn} for p in (0.8, 1.0, 1.4)]
    print(fit(BidTrainer(BidModel()), advs, steps_per_adv=50).mean())
