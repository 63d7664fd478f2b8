"""Home Credit default risk: numeric features + categorical embeddings -> MLP, focal loss.

The assistant added a reusable `cuda_graph_capture()` context manager and a `use_cuda_graphs`
switch to the trainer ("tabular batches are tiny, so the step is launch-bound").
"""
import contextlib
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.metrics import roc_auc_score


@dataclass
class Config:
    batch_size: int = 2048
    lr: float = 2e-3
    epochs: int = 6
    gamma: float = 2.0  # focal-loss focusing parameter
    pos_weight: float = 11.4  # ~ negatives / positives
    use_cuda_graphs: bool = True


@contextlib.contextmanager
def cuda_graph_capture(graph, pool=None):
    """Usage: with cuda_graph_capture(g): out = step()"""
    torch.cuda.synchronize()
    with torch.cuda.graph(graph, pool=pool, stream=torch.cuda.current_stream()):  # HAZARD: stream
        yield graph
    torch.cuda.synchronize()


class CreditMLP(nn.Module):
    def __init__(self, n_num, cat_cards, emb_dim=8):
        super().__init__()
        self.cat_cards = cat_cards
        self.embs = nn.ModuleList(nn.Embedding(c + 1, emb_dim) for c in cat_cards)
        d = n_num + emb_dim * len(cat_cards)
        self.mlp = nn.Sequential(nn.Linear(d, 512), nn.BatchNorm1d(512), nn.SiLU(), nn.Dropout(0.2), nn.Linear(512, 128), nn.SiLU(), nn.Linear(128, 2))

    def forward(self, num, cat):
        embs = [e(cat[:, i].clamp(max=c)) for i, (e, c) in enumerate(zip(self.embs, self.cat_cards))]  # CLEAN: unseen codes clamped on device
        return self.mlp(torch.cat([num] + embs, dim=1))


class Trainer:
    def __init__(self, model, cfg, steps_per_epoch):
        self.model, self.cfg = model, cfg
        self.opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, capturable=cfg.use_cuda_graphs)  # CLEAN: capturable when graphed
        self.sched = torch.optim.lr_scheduler.OneCycleLR(self.opt, max_lr=cfg.lr, total_steps=cfg.epochs * steps_per_epoch)
        self.aug_gen = torch.Generator(device="cuda").manual_seed(0)
        self.graph = None

    def swap_noise(self, num, p=0.1):
        swap = torch.rand(num.shape, device=num.device, generator=self.aug_gen) < p  # HAZARD: rng
        donor = num[torch.randperm(num.shape[0], device=num.device)]  # CLEAN: randperm on the default CUDA generator
        return torch.where(swap, donor, num)

    def focal_loss(self, logits, y):
        w = torch.tensor([1.0, self.cfg.pos_weight], device=logits.device)  # HAZARD: host-sync
        logp = F.log_softmax(logits, -1).gather(1, y[:, None]).squeeze(1)
        gamma = self.cfg.gamma  # CLEAN: constant for the whole run
        return (-(1 - logp.exp()) ** gamma * logp * w[y]).mean()

    def _step(self, num, cat, y):
        loss = self.focal_loss(self.model(self.swap_noise(num), cat), y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        torch.cuda.empty_cache()  # HAZARD: memory
        return loss

    def step(self, num, cat, y):
        if not self.cfg.use_cuda_graphs:
            return self._step(num, cat, y)
        if self.graph is None:
            self.s = [num.clone(), cat.clone(), y.clone()]
            for _ in range(3):
                self._step(*self.s)  # warm-up
            self.graph = torch.cuda.CUDAGraph()
            with cuda_graph_capture(self.graph):
                self.s_loss = self._step(*self.s)
        for dst, src in zip(self.s, (num, cat, y)):
            dst.copy_(src, non_blocking=True)  # CLEAN: copy_ into static inputs
        self.graph.replay()
        self.sched.step()  # HAZARD: optimizer
        return self.s_loss


def fit(model, train_loader, val_loader, cfg):
    tr = Trainer(model, cfg, len(train_loader))
    for epoch in range(cfg.epochs):
        model.train()
        for num, cat, y in train_loader:  # drop_last=True, fixed batch shape
            tr.step(num.cuda(non_blocking=True), cat.cuda(non_blocking=True), y.cuda(non_blocking=True))
        model.eval()
        with torch.no_grad():
            probs = torch.cat([F.softmax(model(n.cuda(), c.cuda()), -1)[:, 1] for n, c, _ in val_loader])
        auc = roc_auc_score(torch.cat([y for *_, y in val_loader]).numpy(), probs.cpu().numpy())  # CLEAN: eager eval outside the graph
        print(f"epoch {epoch} loss {tr.s_loss.item():.4f} val AUC {auc:.4f}")
