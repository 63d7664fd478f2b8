"""Deep Interest Network (DIN) CTR scoring service: requests are micro-batched by a RequestBatcher and scored
by the model compiled with backend="cudagraphs". An A/B controller retunes the calibration temperature."""
import logging

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence

log = logging.getLogger("din")

class AttentionUnit(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(4 * dim, 80), nn.Sigmoid(), nn.Linear(80, 1))

    def forward(self, q, keys):
        q = q[:, None].expand_as(keys)
        return self.mlp(torch.cat([q, keys, q - keys, q * keys], -1)).squeeze(-1)

class DIN(nn.Module):
    def __init__(self, n_items=500_000, dim=32, n_dense=8):
        super().__init__()
        self.item_emb = nn.Embedding(n_items, dim, padding_idx=0)
        self.att = AttentionUnit(dim)
        self.mlp = nn.Sequential(nn.Linear(3 * dim + n_dense, 200), nn.PReLU(), nn.Linear(200, 80), nn.PReLU(),
                                 nn.Linear(80, 1))
        self.calibration_temp = 1.0
        self.dense_cap = 50.0

    def forward(self, target, hist, dense):
        q, keys = self.item_emb(target), self.item_emb(hist)
        w = self.att(q, keys).masked_fill(hist == 0, 0.0)  # CLEAN: masked_fill keeps the shape
        interest = (w.unsqueeze(-1) * keys).sum(1)
        dense.clamp_(0.0, self.dense_cap)  # HAZARD: static-address
        logit = self.mlp(torch.cat([q, interest, q * interest, torch.log1p(dense)], -1)).squeeze(-1)
        t = self.calibration_temp  # HAZARD: python-scalar
        p = torch.sigmoid(logit / t)
        log.debug("batch mean pCTR %s", p.mean())  # HAZARD: host-code
        return p

class RequestBatcher:
    def __init__(self, score_fn, max_batch=256, hist_len=50):
        self.score_fn = score_fn
        self.max_batch, self.hist_len = max_batch, hist_len

    def _tensors(self, requests, pad_to=None):
        target = torch.tensor([r["item"] for r in requests])
        hists = [torch.tensor(r["history"][-self.hist_len:] or [0]) for r in requests]
        dense = torch.tensor([r["dense"] for r in requests], dtype=torch.float32)
        if pad_to is None:
            return target.cuda(), pad_sequence(hists, batch_first=True).cuda(), dense.cuda()  # CLEAN: eager uploads before the call
        hist = torch.zeros(pad_to, self.hist_len, dtype=torch.long)
        for i, h in enumerate(hists):
            hist[i, : len(h)] = h
        pad = pad_to - len(requests)
        return (torch.cat([target, target.new_zeros(pad)]).cuda(), hist.cuda(),
                torch.cat([dense, dense.new_zeros(pad, dense.shape[1])]).cuda())

    @torch.no_grad()
    def score(self, requests):
        target, hist, dense = self._tensors(requests)
        return self.score_fn(target, hist, dense).clone()  # HAZARD: dynamic-shape

    @torch.no_grad()
    def score_fixed(self, requests):
        target, hist, dense = self._tensors(requests, pad_to=self.max_batch)
        return self.score_fn(target, hist, dense)[: len(requests)].clone()  # CLEAN: fixed (max_batch, hist_len) shape

def ab_controller(model, hour):
    model.calibration_temp = 1.0 + 0.05 * (hour % 4)

if __name__ == "__main__":
    model = DIN()
    batcher = RequestBatcher(torch.compile(model.cuda().eval(), backend="cudagraphs"))
    for hour in range(24):
        ab_controller(model, hour)
        reqs = [{"item": 17 + i, "history": list(range(1, 3 + (i * 7) % 60)), "dense": [1.0] * 8}
                for i in range(1 + hour * 9)]
        ctr = batcher.score(reqs)
        ctr_fixed = batcher.score_fixed(reqs[:256])
