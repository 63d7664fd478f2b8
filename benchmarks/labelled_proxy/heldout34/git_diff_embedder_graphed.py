"""Contrastive embedder of git diff hunks for a code-review assistant; encoder + pooler graphed (torch)."""
from dataclasses import dataclass
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, ADD, DEL = 0, 1, 2

@dataclass
class PoolConfig:
    context_weight: float = 1.0
    temperature: float = 0.05
    def weights(self, kinds):
        w = torch.where(kinds == PAD, 0.0, 1.0)  # CLEAN: three-argument where
        return w * torch.where((kinds == ADD) | (kinds == DEL), 1.0, self.context_weight)  # HAZARD: python-scalar

class ActivationStore:
    def __init__(self):
        self.stats = {}
    def track(self, name, module):
        module.register_forward_hook(lambda m, i, o: self.stats.__setitem__(name, o.detach().std()))  # HAZARD: api-misuse

class DiffEncoder(nn.Module):
    def __init__(self, vocab=50000, d=256):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.kind = nn.Embedding(3, d)
        self.conv = nn.Conv1d(d, d, 5, padding=2)
    def forward(self, ids, kinds):
        x = self.emb(ids) + self.kind(kinds)
        self._track_lengths(kinds)
        return F.gelu(self.conv(x.transpose(1, 2))).transpose(1, 2)
    def _track_lengths(self, kinds):
        self.lengths = (kinds != PAD).sum(-1).tolist()  # HAZARD: host-sync

class HunkPooler(nn.Module):
    def __init__(self, cfg, d=256):
        super().__init__()
        self.cfg, self.proj = cfg, nn.Linear(d, 128)
    def forward(self, h, kinds):
        w = self.cfg.weights(kinds).unsqueeze(-1)
        pooled = (h * w).sum(1) / w.sum(1).clamp_min(1.0)
        return F.normalize(self.proj(pooled + self._changed_mean(h, kinds)), dim=-1)
    @staticmethod
    def _changed_mean(h, kinds):
        changed = h[kinds != PAD]  # HAZARD: dynamic-shape
        return changed.mean(0, keepdim=True)

class EmbedderTrainer:
    def __init__(self, cfg, batch=32, seq=256):
        self.cfg = cfg
        self.enc, self.pool = DiffEncoder().cuda(), HunkPooler(cfg).cuda()
        self.store = ActivationStore()
        self.store.track("conv", self.enc.conv)
        ids = torch.randint(3, 50000, (batch, seq), device="cuda")
        kinds = torch.randint(0, 3, (batch, seq), device="cuda")
        h = torch.randn(batch, seq, 256, device="cuda", requires_grad=True)
        self.g_enc, self.g_pool = torch.cuda.make_graphed_callables(
            (self.enc, self.pool), ((ids, kinds), (h, kinds.clone())))
        self.opt = torch.optim.AdamW(list(self.enc.parameters()) + list(self.pool.parameters()), lr=2e-4)
    def embed(self, ids, kinds):
        return self.g_pool(self.g_enc(ids, kinds), kinds)  # CLEAN: positional calls of graphed callables
    def step(self, a, b):
        za, zb = self.embed(*a), self.embed(*b)
        logits = za @ zb.t() / self.cfg.temperature
        loss = F.cross_entropy(logits, torch.arange(len(za), device="cuda"))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()  # CLEAN: eager optimizer outside the graphs
        return loss.detach()
    @torch.no_grad()
    def index(self, ids, kinds):
        self.enc.eval(), self.pool.eval()
        out = self.pool(self.enc(ids, kinds), kinds)  # CLEAN: eval mode runs the original eager forward
        self.enc.train(), self.pool.train()
        return out

def train(pairs, epochs=3):
    cfg = PoolConfig()
    trainer = EmbedderTrainer(cfg)
    for epoch in range(epochs):
        cfg.context_weight = 1.0 - 0.3 * epoch
        for a, b in pairs:
            trainer.step(tuple(t.cuda() for t in a), tuple(t.cuda() for t in b))
    return trainer
