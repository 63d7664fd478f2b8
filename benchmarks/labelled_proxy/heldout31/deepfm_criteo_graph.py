"""DeepFM CTR training on Criteo (13 dense + 26 hashed fields). The graph part is an assistant's diff:
"capture the whole train step so the small embedding/MLP kernels stop being launch-bound"."""
from dataclasses import dataclass
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class TrainConfig:
    batch_size: int = 4096
    embed_dim: int = 16
    hash_size: int = 1_000_000
    lr: float = 1e-3
    use_cuda_graphs: bool = True  # CUDA graph optimization
    warmup_iters: int = 3


class DeepFM(nn.Module):
    def __init__(self, cfg, n_dense=13, n_sparse=26):
        super().__init__()
        self.emb = nn.Embedding(cfg.hash_size, cfg.embed_dim)
        self.lin = nn.Embedding(cfg.hash_size, 1)
        self.dense_proj = nn.Linear(n_dense, cfg.embed_dim)
        d_in = (n_sparse + 1) * cfg.embed_dim
        self.mlp = nn.Sequential(nn.Linear(d_in, 400), nn.ReLU(), nn.Linear(400, 400), nn.ReLU(), nn.Linear(400, 1))
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, dense, sparse):
        e = torch.cat([self.emb(sparse), self.dense_proj(dense).unsqueeze(1)], dim=1)
        fm = 0.5 * (e.sum(1).pow(2) - e.pow(2).sum(1)).sum(1, keepdim=True)
        first = self.lin(sparse).sum(1)
        return (self.bias + first + fm + self.mlp(e.flatten(1))).squeeze(1)


class GraphedTrainer:
    def __init__(self, model, cfg, dense_mean: np.ndarray, dense_std: np.ndarray):
        self.model, self.cfg = model, cfg
        self.opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, capturable=True)  # CLEAN: capturable Adam inside the graph
        self.sched = torch.optim.lr_scheduler.ExponentialLR(self.opt, gamma=0.9999)
        self.mean_np, self.std_np = dense_mean, dense_std  # from the preprocessing job
        self.steps_done = 0
        self.loss_sum = 0.0
        self.neg_w = torch.ones((), device="cuda")  # negative-downsampling correction, set per epoch
        self.graph = None

    def _step(self, dense, sparse, label):
        stats = torch.from_numpy(np.stack([self.mean_np, self.std_np])).cuda()  # HAZARD: pinned-memory
        dense = (torch.log1p(dense.clamp_min(0)) - stats[0]) / stats[1]
        logits = self.model(dense, sparse % self.cfg.hash_size)
        w = torch.where(label > 0, 1.0, self.neg_w)  # CLEAN: correction weight read from a device tensor
        loss = F.binary_cross_entropy_with_logits(logits, label, weight=w)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 10.0)  # CLEAN: clip_grad_norm_ is capturable
        self.opt.step()
        self.steps_done += 1  # HAZARD: host-code
        self.loss_sum += loss.item()  # HAZARD: host-sync
        return loss

    def capture(self, dense, sparse, label):
        self.s_dense, self.s_sparse, self.s_label = dense.clone(), sparse.clone(), label.clone()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # CLEAN: warm-up on a forked side stream, joined below
            for _ in range(self.cfg.warmup_iters):
                self._step(self.s_dense, self.s_sparse, self.s_label)
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.s_loss = self._step(self.s_dense, self.s_sparse, self.s_label)

    def train_step(self, dense, sparse, label):
        if not self.cfg.use_cuda_graphs:
            return self._step(dense, sparse, label)
        if self.graph is None:
            self.capture(dense, sparse, label)
        self.s_dense.copy_(dense, non_blocking=True)  # CLEAN: copy_ into the static input
        self.s_sparse.copy_(sparse, non_blocking=True)
        self.s_label.copy_(label, non_blocking=True)
        self.graph.replay()
        self.sched.step()  # HAZARD: optimizer
        return self.s_loss


def batches(cfg, n):
    for _ in range(n):
        dense = torch.rand(cfg.batch_size, 13).mul_(100).pin_memory()
        sparse = torch.randint(0, 2**31 - 1, (cfg.batch_size, 26)).pin_memory()
        label = (torch.rand(cfg.batch_size) < 0.25).float().pin_memory()
        yield dense.cuda(non_blocking=True), sparse.cuda(non_blocking=True), label.cuda(non_blocking=True)  # CLEAN: pinned upload outside the graph


def main():
    cfg = TrainConfig()
    model = DeepFM(cfg).cuda()
    trainer = GraphedTrainer(model, cfg, np.full(13, 2.0, np.float32), np.full(13, 1.5, np.float32))
    sample_rate = [0.5, 0.25, 0.25]
    for epoch in range(3):
        trainer.neg_w.fill_(1.0 / sample_rate[epoch])  # CLEAN: in-place update of a captured tensor
        for dense, sparse, label in batches(cfg, 200):
            trainer.train_step(dense, sparse, label)
            if trainer.steps_done % 1000 == 0:
                torch.save(model.state_dict(), f"deepfm_{trainer.steps_done}.pt")
        print(f"epoch {epoch} last loss {trainer.s_loss.item():.4f}")  # CLEAN: read after replay, outside the graph


if __name__ == "__main__":
    main()
