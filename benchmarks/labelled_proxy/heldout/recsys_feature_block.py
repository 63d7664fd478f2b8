import torch
import torch.nn as nn


class DedupEmbeddingInteraction(nn.Module):
    """Categorical embedding lookup + dense projection, compiled once in __init__."""

    def __init__(self, num_embeddings: int, dim: int, dense_in: int, l1_coef: float = 1e-5):
        super().__init__()
        self.table = nn.Embedding(num_embeddings, dim)
        self.dense = nn.Linear(dense_in, dim)
        self.out = nn.Linear(2 * dim, 1)
        self.l1_coef = l1_coef
        self.temperature = 1.0
        self._fwd = torch.compile(self._forward_impl, mode="reduce-overhead")

    def _forward_impl(self, dense_x: torch.Tensor, cat_ids: torch.Tensor):
        uniq, inverse = torch.unique(cat_ids, return_inverse=True)  # HAZARD: dynamic-shape
        emb = self.table(uniq)[inverse].mean(1)
        d = torch.relu(self.dense(dense_x))
        active = d[d > 0]  # HAZARD: dynamic-shape
        l1 = self.l1_coef * active.abs().sum()  # CLEAN: l1 coefficient fixed at construction, never reassigned
        density = (d > 0).float().mean()  # CLEAN: boolean comparison reduced to a fixed-shape mean, no masking
        logit = self.out(torch.cat([emb, d], dim=-1)).squeeze(-1) / self.temperature  # HAZARD: python-scalar
        return logit, l1, density

    def forward(self, dense_x, cat_ids):
        return self._fwd(dense_x, cat_ids)

    def anneal(self, step: int, total: int):
        self.temperature = max(0.1, 1.0 - step / total)


def train(model: DedupEmbeddingInteraction, loader, total_steps: int):
    opt = torch.optim.Adagrad(model.parameters(), lr=0.01)
    for step, (dense_x, cat_ids, y) in enumerate(loader):
        logit, l1, _ = model(dense_x.cuda(), cat_ids.cuda())
        loss = nn.functional.binary_cross_entropy_with_logits(logit, y.cuda().float()) + l1
        opt.zero_grad()
        loss.backward()
        opt.step()
        model.anneal(step, total_steps)
        if step == total_steps:
            break
