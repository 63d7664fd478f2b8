"""Rank-4 PowerSGD gradient compression with error feedback for cross-region data-parallel
training of a recommendation tower, written by hand (not the DDP comm hook). The step is
captured through a `captured_step` context-manager helper; P and Q are all-reduced inside."""
import contextlib

import torch
import torch.distributed as dist


@contextlib.contextmanager
def captured_step(graph, warmup_fn, iters=3):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(iters):
            warmup_fn()
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        yield


def orthonormalize_(m):
    for i in range(m.shape[1]):
        col = m[:, i]
        col.div_(torch.linalg.vector_norm(col).clamp_min(1e-8))  # CLEAN: device-side normalisation, no host read
        if i + 1 < m.shape[1]:
            rest = m[:, i + 1:]
            rest.sub_(col[:, None] * (col @ rest)[None, :])


class PowerSGD:
    def __init__(self, params, rank=4, ef_decay=1.0, reset_thresh=1e3):
        self.params = [p for p in params if p.requires_grad]
        self.world = dist.get_world_size()
        self.mats = [p for p in self.params if p.ndim == 2 and min(p.shape) > rank]
        self.vecs = [p for p in self.params if not (p.ndim == 2 and min(p.shape) > rank)]
        self.err = [torch.zeros_like(p) for p in self.mats]
        self.q = [torch.randn(p.shape[1], rank, device="cuda") for p in self.mats]
        self.ef_decay, self.reset_thresh = ef_decay, reset_thresh
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(42)
        self.flat_vec = torch.zeros(sum(p.numel() for p in self.vecs), device="cuda")

    def reduce(self):
        for i, p in enumerate(self.mats):
            decay = self.ef_decay  # HAZARD: python-scalar
            m = p.grad + decay * self.err[i]
            q = self.q[i]
            q.add_(1e-3 * torch.randn(q.shape, generator=self.gen, device="cuda"))  # HAZARD: rng
            orthonormalize_(q)
            pmat = m @ q
            dist.all_reduce(pmat)
            orthonormalize_(pmat)
            q.copy_(m.t() @ pmat)  # CLEAN: warm-start Q updated in place
            dist.all_reduce(q)
            q.div_(self.world)
            approx = pmat @ q.t()
            self.err[i] = m - approx  # HAZARD: static-address
            if self.err[i].norm() > self.reset_thresh:  # HAZARD: dynamic-control-flow
                self.err[i].zero_()
            p.grad.copy_(approx)
        off = 0
        for p in self.vecs:
            self.flat_vec[off:off + p.numel()].copy_(p.grad.view(-1))
            off += p.numel()
        dist.all_reduce(self.flat_vec)
        self.flat_vec.div_(self.world)
        off = 0
        for p in self.vecs:
            p.grad.copy_(self.flat_vec[off:off + p.numel()].view_as(p))  # CLEAN: uncompressed tensors averaged in a static flat buffer
            off += p.numel()


class TowerTrainer:
    def __init__(self, tower, batch=4096, dim=256):
        self.tower = tower
        self.comp = PowerSGD(tower.parameters())
        self.opt = torch.optim.Adam(tower.parameters(), lr=1e-3, capturable=True)  # CLEAN: capturable Adam stepped in the graph
        self.x = torch.zeros(batch, dim, device="cuda")
        self.y = torch.zeros(batch, device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(self.tower(self.x).squeeze(-1), self.y)
        loss.backward()
        self.comp.reduce()
        self.opt.step()
        self.opt.zero_grad(set_to_none=False)
        return loss.detach()

    def setup(self):
        with captured_step(self.graph, self._step):
            self.loss = self._step()

    def fit(self, loader, epochs):
        for ep in range(epochs):
            self.comp.ef_decay = 0.9 if ep == 0 else 1.0
            for x, y in loader:
                self.x.copy_(x, non_blocking=True)
                self.y.copy_(y, non_blocking=True)
                self.graph.replay()
