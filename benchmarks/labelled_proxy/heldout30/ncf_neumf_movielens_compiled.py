# NeuMF (NCF) on MovieLens-20M, from an MLPerf v0.5-era script (apex optimizers, pretrain loading by
# `.data` assignment). torch.compile with triton.cudagraphs now wraps the train step and the HR@10 metric.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
try:
    from apex.optimizers import FusedAdam as Adam  # TODO: drop apex after the 2.x migration
except ImportError:
    from torch.optim import Adam

CG = {"triton.cudagraphs": True}


class NeuMF(nn.Module):
    def __init__(self, n_users, n_items, mf_dim=64, layers=(256, 256, 128, 64)):
        super().__init__()
        self.mf_user, self.mf_item = nn.Embedding(n_users, mf_dim), nn.Embedding(n_items, mf_dim)
        self.mlp_user, self.mlp_item = nn.Embedding(n_users, layers[0] // 2), nn.Embedding(n_items, layers[0] // 2)
        self.mlp = nn.Sequential(*[m for a, b in zip(layers[:-1], layers[1:]) for m in (nn.Linear(a, b), nn.ReLU())])
        self.final = nn.Linear(mf_dim + layers[-1], 1)

    def forward(self, user, item):
        mf = self.mf_user(user) * self.mf_item(item)  # CLEAN: embedding lookups with CUDA indices
        mlp = self.mlp(torch.cat([self.mlp_user(user), self.mlp_item(item)], -1))
        return self.final(torch.cat([mf, mlp], -1)).squeeze(-1)


model = NeuMF(138493, 26744).cuda()
opt = Adam(model.parameters(), lr=0.0045, betas=(0.25, 0.5))
neg_weight = 1.0


@torch.compile(options=CG)
def train_step(user, item, label):
    logits = model(user, item)
    w = torch.where(label > 0, torch.ones_like(logits), torch.full_like(logits, neg_weight))  # HAZARD: python-scalar
    return F.binary_cross_entropy_with_logits(logits, label, weight=w)


@torch.compile(options=CG)
def hit_rate(users, items, k=10):
    scores = model(users.view(-1, 1).expand_as(items), items)
    hits = (scores.topk(k, dim=1).indices == 0).any(1).float()
    return hits.mean(), hits.tolist()  # HAZARD: host-sync


@torch.compile(mode="max-autotune-no-cudagraphs")
def per_user_hits(users, items, k=10):
    scores = model(users.view(-1, 1).expand_as(items), items)
    return (scores.topk(k, dim=1).indices == 0).any(1).tolist()  # CLEAN: compile without CUDA graphs


def load_pretrained(gmf, mlp):
    model.mf_user.weight.data = gmf.embed_user.weight.data.cuda()  # HAZARD: static-address
    model.mf_item.weight.data.copy_(gmf.embed_item.weight.data)  # CLEAN: in-place copy keeps the parameter's address


def train(train_users, train_items, train_labels, test_users, test_items, epochs=10, batch=1048576):
    global neg_weight
    n = train_users.numel()
    for epoch in range(epochs):
        neg_weight = 1.0 + 0.1 * epoch
        perm = torch.randperm(n, device="cuda")
        for i in range(0, n, batch):
            idx = perm[i:i + batch]
            opt.zero_grad()
            loss = train_step(train_users[idx], train_items[idx], train_labels[idx])  # HAZARD: dynamic-shape
            loss.backward()
            opt.step()
        print("epoch %d loss %.4f" % (epoch, loss.item()))  # CLEAN: eager read before any other compiled call
        with torch.no_grad():
            hr, _ = hit_rate(test_users, test_items)
            print("HR@10 %.4f" % hr.item())  # CLEAN: read right after its own call
    if epochs > 0:
        detail = per_user_hits(test_users[:1000], test_items[:1000])
        print("first-1000 users hit", float(np.mean(detail)))
