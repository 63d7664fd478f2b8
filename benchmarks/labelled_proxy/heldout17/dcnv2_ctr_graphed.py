"""DCN-V2 click-through-rate model (low-rank cross network + deep tower), Criteo-style data.

The embedding lookup stays eager; the cross network and the deep tower are graphed with
torch.cuda.make_graphed_callables and combined by an eager logit layer.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_DENSE, N_SPARSE, EMB = 13, 26, 16


class CrossNetV2(nn.Module):
    def __init__(self, d, n_layers=3, rank=64):
        super().__init__()
        self.U = nn.ModuleList(nn.Linear(d, rank, bias=False) for _ in range(n_layers))
        self.V = nn.ModuleList(nn.Linear(rank, d) for _ in range(n_layers))
        self.cross_scale = 0.2

    def forward(self, x0):
        x = x0
        scale = self.cross_scale  # HAZARD: python-scalar
        for U, V in zip(self.U, self.V):
            x = x0 * V(U(x)) * scale + x
        return x


class DeepTower(nn.Module):
    def __init__(self, d, hidden=(512, 256), dense_cols=tuple(range(N_DENSE)), keep=0.9):
        super().__init__()
        self.dense_cols = list(dense_cols)
        self.keep = keep
        self.drop_gen = torch.Generator(device="cuda")
        self.drop_gen.manual_seed(5)
        layers, prev = [], d + len(self.dense_cols)
        for h in hidden:
            layers += [nn.Linear(prev, h), nn.BatchNorm1d(h), nn.ReLU()]
            prev = h
        self.mlp = nn.Sequential(*layers)

    def forward(self, x, field_mask=None):
        dense = x[:, self.dense_cols]  # HAZARD: host-sync
        h = torch.cat([x, torch.log1p(dense.clamp_min(0))], -1)
        if self.training:
            mask = torch.bernoulli(torch.full_like(h, self.keep), generator=self.drop_gen)  # HAZARD: rng
            h = h * mask / self.keep
        if field_mask is not None:
            h = h * field_mask
        return self.mlp(h)


class DCNv2Trainer:
    def __init__(self, vocab_sizes, batch=4096):
        d = N_DENSE + N_SPARSE * EMB
        self.emb = nn.ModuleList(nn.Embedding(v, EMB) for v in vocab_sizes).cuda()
        self.cross = CrossNetV2(d).cuda()
        self.deep = DeepTower(d).cuda()
        self.logit = nn.Linear(d + 256, 1).cuda()
        mods = [self.emb, self.cross, self.deep, self.logit]
        self.opt = torch.optim.Adam([p for m in mods for p in m.parameters()], lr=1e-3)
        sample = torch.randn(batch, d, device="cuda", requires_grad=True)
        self.cross_g, self.deep_g = torch.cuda.make_graphed_callables(
            (self.cross, self.deep), ((sample,), (sample.detach().clone().requires_grad_(True),)))

    def embed(self, dense, sparse):
        e = [tab(sparse[:, i]) for i, tab in enumerate(self.emb)]
        return torch.cat([dense] + e, -1)

    def train_epoch(self, loader, epoch, field_mask=None):
        self.cross.cross_scale = min(1.0, 0.2 + 0.1 * epoch)
        for dense, sparse, label in loader:
            x0 = self.embed(dense.cuda(non_blocking=True), sparse.cuda(non_blocking=True))
            c = self.cross_g(x0)  # CLEAN: graphed callable called positionally
            d = self.deep_g(x0, field_mask=field_mask)  # HAZARD: api-misuse
            logit = self.logit(torch.cat([c, d], -1)).squeeze(-1)
            loss = F.binary_cross_entropy_with_logits(logit, label.cuda().float())
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()

    @torch.no_grad()
    def evaluate(self, loader):
        self.cross.eval()
        self.deep.eval()
        scores = []
        for dense, sparse, _ in loader:
            x0 = self.embed(dense.cuda(), sparse.cuda())
            c, d = self.cross_g(x0), self.deep_g(x0)  # CLEAN: eval mode differs from capture, eager forward runs
            scores.append(torch.sigmoid(self.logit(torch.cat([c, d], -1))).squeeze(-1))
        self.cross.train()
        self.deep.train()
        return torch.cat(scores)
