"""RotatE knowledge-graph embeddings with self-adversarial negative sampling.

Training step and optimizer step are compiled from one shared **COMPILE_OPTS dict.
"""
import math
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

COMPILE_OPTS = dict(mode="reduce-overhead", fullgraph=False, dynamic=False)


class RotatE(nn.Module):
    def __init__(self, n_ent, n_rel, dim=500, gamma=12.0):
        super().__init__()
        self.ent = nn.Embedding(n_ent, 2 * dim)
        self.rel = nn.Embedding(n_rel, dim)
        self.gamma, self.margin, self.n_ent = gamma, 0.0, n_ent
        self.emb_range = (gamma + 2.0) / dim
        nn.init.uniform_(self.ent.weight, -self.emb_range, self.emb_range)
        nn.init.uniform_(self.rel.weight, -self.emb_range, self.emb_range)

    def score(self, h, r, t):
        re_h, im_h = h.chunk(2, -1)
        re_t, im_t = t.chunk(2, -1)
        phase = r / (self.emb_range / math.pi)
        re_r, im_r = torch.cos(phase), torch.sin(phase)
        re = re_h * re_r - im_h * im_r - re_t
        im = re_h * im_r + im_h * re_r - im_t
        return self.gamma - torch.stack([re, im]).norm(dim=0).sum(-1)  # CLEAN: gamma fixed for the whole run


def make_step(model, neg_k=256, adv_temp=1.0):
    def step(pos):  # (B, 3) long tensor of (head, relation, tail)
        h, r, t = pos.unbind(1)
        neg_t = torch.from_numpy(np.random.randint(0, model.n_ent, size=(pos.shape[0], neg_k))).to(pos.device)  # HAZARD: host-code
        p = model.score(model.ent(h), model.rel(r), model.ent(t))
        n = model.score(model.ent(h)[:, None], model.rel(r)[:, None], model.ent(neg_t))
        w = F.softmax(n * adv_temp, -1).detach()
        margin = model.margin  # HAZARD: python-scalar
        loss = -(F.logsigmoid(p - margin).mean() + (w * F.logsigmoid(margin - n)).sum(-1).mean()) / 2
        if (model.ent.weight.abs() > 10 * model.emb_range).any():  # HAZARD: dynamic-control-flow
            loss = loss + 1e-3 * model.ent.weight.pow(2).mean()
        return loss
    return torch.compile(step, **COMPILE_OPTS)


def train(model, loader, epochs=50, lr=1e-3):
    model.cuda()
    step = make_step(model)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    opt_step = torch.compile(opt.step, **COMPILE_OPTS)
    for epoch in range(epochs):
        model.margin = min(6.0, 0.5 * epoch)
        for pos in loader:
            loss = step(pos.cuda(non_blocking=True))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt_step()
        if epoch in (20, 35):
            opt.param_groups[0]["lr"] *= 0.1  # HAZARD: optimizer
        print(f"epoch {epoch}: loss {loss.item():.4f}")  # CLEAN: print and .item() in the eager loop


@torch.no_grad()
def filtered_rank(model, triples, candidates):
    rank_fn = torch.compile(lambda h, r, c: model.score(h[:, None], r[:, None], c), mode="max-autotune-no-cudagraphs")
    ranks = []
    for (h, r, t), cand in zip(triples, candidates):  # candidate 0 is the true tail
        s = rank_fn(model.ent(h), model.rel(r), model.ent(cand))  # CLEAN: ragged candidate lists under a no-cudagraphs compile
        ranks.append((s > s[:, :1]).sum(-1) + 1)
    ranks = torch.cat(ranks).float()
    return {"mrr": (1.0 / ranks).mean().item(), "hits@10": (ranks <= 10).float().mean().item()}


if __name__ == "__main__":
    kg = RotatE(n_ent=40_943, n_rel=11)
    triples = torch.stack([torch.randint(0, 40_943, (86_835,)), torch.randint(0, 11, (86_835,)),
                           torch.randint(0, 40_943, (86_835,))], 1)
    train(kg, torch.utils.data.DataLoader(triples, batch_size=1024, shuffle=True, drop_last=True), epochs=2)
