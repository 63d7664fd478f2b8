"""Learned cost model for tensor-program auto-scheduling (TenSet-style MLP over per-statement
features). Each search round proposes candidate schedules, ranks them with the model,
measures the best ones on the device and fine-tunes the model with a pairwise rank loss.

The compiled model is handed to the search task; loss and optimizer step are compiled too.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

FEAT = 164
TRAIN_BS = 512


class CostMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(FEAT, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU())
        self.out = nn.Linear(256, 1)

    def forward(self, stmt_feats, stmt_mask):               # (N, S, FEAT), (N, S)
        h = self.enc(stmt_feats) * stmt_mask[..., None]  # CLEAN: padding handled by multiplying with the mask
        return self.out(h.sum(1)).squeeze(-1)


def rank_loss(model, feats, mask, throughput):
    pred = model(feats, mask)
    perm = torch.from_numpy(np.random.permutation(feats.shape[0])).to(feats.device)  # HAZARD: host-code
    d_pred, d_true = pred - pred[perm], throughput - throughput[perm]
    valid = d_true.abs() > 1e-3
    n_pairs = int(valid.sum())  # HAZARD: host-sync
    return (F.softplus(-torch.sign(d_true) * d_pred) * valid).sum() / max(n_pairs, 1)


class SearchTask:
    def __init__(self, workload, cost_model, measurer, top=32):
        self.workload, self.cost_model, self.measurer, self.top = workload, cost_model, measurer, top

    @torch.no_grad()
    def propose(self, candidates):
        feats, mask = self.workload.featurize(candidates)   # numpy (N, S, FEAT), N differs per round
        feats, mask = torch.from_numpy(feats).cuda(), torch.from_numpy(mask).cuda()
        scores = self.cost_model(feats, mask)  # HAZARD: dynamic-shape
        order = scores.argsort(descending=True)[: self.top].cpu().tolist()  # CLEAN: host read after the compiled call
        return [candidates[i] for i in order]


class Tuner:
    def __init__(self, model):
        self.model = model.cuda()
        self.fast_model = torch.compile(self.model, mode="max-autotune")
        self.bulk_model = torch.compile(self.model, mode="max-autotune-no-cudagraphs", dynamic=True)
        self.lr = torch.tensor(7e-4, device="cuda")
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=self.lr, weight_decay=1e-4, capturable=True)
        self.loss_fn = torch.compile(rank_loss, mode="max-autotune")
        self.opt_step = torch.compile(self.opt.step, mode="max-autotune")
        self.records = []

    def warm_start(self, workload, n=20_000):
        cands = workload.sample_candidates(n)
        f, m = (torch.from_numpy(a).cuda() for a in workload.featurize(cands))
        with torch.no_grad():
            scores = self.bulk_model(f, m)  # CLEAN: no-cudagraphs compile for the one-off bulk round
        return [cands[i] for i in scores.topk(64).indices.tolist()]

    def fine_tune(self, steps=50):
        feats, mask, thr = (torch.cat(x) for x in zip(*self.records))
        for _ in range(steps):
            idx = torch.randint(0, feats.shape[0], (TRAIN_BS,), device="cuda")   # fixed-size batches
            loss = self.loss_fn(self.model, feats[idx], mask[idx], thr[idx])
            loss.backward()
            self.opt_step()
            self.opt.zero_grad(set_to_none=True)

    def tune(self, task, rounds=40):
        self.records.append(task.measurer.measure(self.warm_start(task.workload)))
        for r in range(rounds):
            best = task.propose(task.workload.evolve(self.records, n_min=256, n_max=2048))
            self.records.append(task.measurer.measure(best))
            self.lr.fill_(7e-4 * 0.5 * (1 + math.cos(math.pi * r / rounds)))  # CLEAN: tensor LR updated in place
            if r == rounds // 2:
                self.opt.param_groups[0]["weight_decay"] = 0.0  # HAZARD: optimizer
            self.fine_tune()


if __name__ == "__main__":
    from autosched import Measurer, Workload

    tuner = Tuner(CostMLP())
    for name in ("resnet50_conv2d_7", "bert_dense_3", "mobilenet_dw_12"):
        wl = Workload.load(name, target="cuda -arch=sm_90")
        tuner.tune(SearchTask(wl, tuner.fast_model, Measurer(wl, repeats=3)))
        print(name, "best GFLOP/s", max(r[2].max().item() for r in tuner.records))
