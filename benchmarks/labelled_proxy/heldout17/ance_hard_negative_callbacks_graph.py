"""ANCE-style dense retrieval trainer: the dual-encoder step and its callbacks are one captured graph."""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyEncoder(nn.Module):
    def __init__(self, vocab=30522, dim=384, out=256):
        super().__init__()
        self.emb, self.norm, self.out = nn.Embedding(vocab, dim), nn.LayerNorm(dim), nn.Linear(dim, out)
        self.mix = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, ids, mask):
        h = self.norm(self.emb(ids) + self.mix(self.emb(ids)))
        m = mask.unsqueeze(-1).float()
        return self.out((h * m).sum(1) / m.sum(1).clamp_min(1.0))


class Callback:
    def on_step_end(self, trainer, loss):  # called at the end of every (captured) step
        pass


class LossHistory(Callback):
    def __init__(self):
        self.values = []

    def on_step_end(self, trainer, loss):
        self.values.append(loss.item())  # HAZARD: host-sync


class StepTimer(Callback):
    def __init__(self):
        self.stamps = []

    def on_step_end(self, trainer, loss):
        self.stamps.append(time.perf_counter())  # HAZARD: host-code


class QueryEmbeddingSnapshot(Callback):
    def __init__(self, batch, dim=256):
        self.stream = torch.cuda.Stream()
        self.buf = torch.zeros(batch, dim, device="cuda")

    def on_step_end(self, trainer, loss):
        with torch.cuda.stream(self.stream):  # HAZARD: stream
            self.buf.copy_(trainer.q_emb.detach(), non_blocking=True)


class EMAWeights(Callback):
    def __init__(self, model, decay=0.999):
        self.model, self.decay = model, decay
        self.shadow = [p.detach().clone() for p in model.parameters()]

    def on_step_end(self, trainer, loss):
        with torch.no_grad():
            for s, p in zip(self.shadow, self.model.parameters()):
                s.lerp_(p, 1.0 - self.decay)  # CLEAN: in-place lerp_ on the device


class DualEncoderTrainer:
    def __init__(self, q_enc, p_enc, callbacks, batch=64, n_neg=7, q_len=32, p_len=192, temp=0.05):
        self.q_enc, self.p_enc = q_enc.cuda(), p_enc.cuda()
        self.params = list(self.q_enc.parameters()) + list(self.p_enc.parameters())
        self.opt = torch.optim.AdamW(self.params, lr=2e-5, weight_decay=0.01)
        self.callbacks, self.temp, self.group = callbacks, temp, 1 + n_neg
        self.step_t = torch.zeros((), dtype=torch.long, device="cuda")
        self.q_ids = torch.zeros(batch, q_len, dtype=torch.long, device="cuda")
        self.q_mask = torch.zeros(batch, q_len, dtype=torch.bool, device="cuda")
        self.p_ids = torch.zeros(batch * self.group, p_len, dtype=torch.long, device="cuda")
        self.p_mask = torch.zeros(batch * self.group, p_len, dtype=torch.bool, device="cuda")

    def _step(self):
        q = F.normalize(self.q_enc(self.q_ids, self.q_mask), dim=-1)
        p = F.normalize(self.p_enc(self.p_ids, self.p_mask), dim=-1)
        labels = torch.arange(q.shape[0], device="cuda") * self.group
        loss = F.cross_entropy(q @ p.t() / self.temp, labels)
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        nn.utils.clip_grad_norm_(self.params, 1.0)  # CLEAN: norm computed and applied on the device
        self.opt.step()  # HAZARD: optimizer
        self.step_t.add_(1)  # CLEAN: device-side step counter
        self.q_emb = q
        for cb in self.callbacks:
            cb.on_step_end(self, loss.detach())
        return loss.detach()

    def capture(self, warmup=3):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
                for _ in range(warmup):
                    self._step()
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph, stream=side):
                    self.loss = self._step()
        torch.cuda.current_stream().wait_stream(side)

    def fit(self, loader):
        self.capture()
        for q_ids, q_mask, p_ids, p_mask in loader:
            for dst, src in ((self.q_ids, q_ids), (self.q_mask, q_mask), (self.p_ids, p_ids), (self.p_mask, p_mask)):
                dst.copy_(src, non_blocking=True)
            self.graph.replay()
