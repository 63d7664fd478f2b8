"""Multi-tenant intent-routing service: one shared encoder, per-tenant heads hot-swapped.

Each batch bucket has its own CUDA graph; all graphs share one memory pool.  When the
scheduler switches tenant, that tenant's head weights are copied into the static head
parameters so no graph has to be re-captured.
"""
import bisect
import time
from dataclasses import dataclass, field

import torch
import torch.nn as nn


@dataclass
class TenantSpec:
    head_w: torch.Tensor
    head_b: torch.Tensor
    threshold: float = 0.5
    allowed_labels: list = field(default_factory=list)


class SharedEncoder(nn.Module):
    def __init__(self, vocab=50000, d=512, layers=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, 8, 4 * d, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers)

    def forward(self, ids):
        return self.enc(self.emb(ids)).mean(dim=1)


class TenantRouter:
    BUCKETS = (1, 4, 16, 64)

    def __init__(self, tenants, seq=64, d=512, n_labels=128):
        self.tenants = tenants
        self.active = next(iter(tenants))
        self.encoder = SharedEncoder(d=d).cuda().eval()
        self.head = nn.Linear(d, n_labels).cuda().eval()
        self.pool = torch.cuda.graph_pool_handle()
        self.stream = torch.cuda.Stream()
        self.inputs, self.outputs, self.graphs, self.stamps = {}, {}, {}, {}
        self.audit_log = []
        self.seq = seq

    def _forward(self, bs):
        spec = self.tenants[self.active]
        feats = self.encoder(self.inputs[bs])
        logits = self.head(feats)
        logits = logits[:, spec.allowed_labels]  # HAZARD: host-sync
        probs = torch.sigmoid(logits)
        thr = spec.threshold  # HAZARD: python-scalar
        decided = torch.where(probs > thr, probs, torch.zeros_like(probs))  # CLEAN: device select
        self.stamps[bs] = time.monotonic()  # HAZARD: host-code
        return decided

    @torch.no_grad()
    def capture_all(self):
        for bs in sorted(self.BUCKETS, reverse=True):
            self.inputs[bs] = torch.zeros(bs, self.seq, dtype=torch.long, device="cuda")
            self.stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.stream):
                for _ in range(3):
                    self._forward(bs)
            torch.cuda.current_stream().wait_stream(self.stream)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool, stream=self.stream):  # CLEAN: side stream, shared pool
                self.outputs[bs] = self._forward(bs)
            self.graphs[bs] = g

    def switch_tenant(self, name):
        spec = self.tenants[name]
        with torch.no_grad():
            self.head.weight.copy_(spec.head_w)  # CLEAN: in-place swap keeps the address
            self.head.bias.copy_(spec.head_b)
        self.active = name

    def load_new_head(self, name, state):
        self.tenants[name].head_w = state["weight"].cuda()
        if name == self.active:
            self.head.weight = nn.Parameter(state["weight"].cuda())  # HAZARD: static-address

    @torch.no_grad()
    def route(self, ids):
        n = ids.shape[0]
        bs = self.BUCKETS[bisect.bisect_left(self.BUCKETS, n)]
        self.inputs[bs].zero_()
        self.inputs[bs][:n].copy_(ids, non_blocking=True)  # CLEAN: copy into the static input
        self.graphs[bs].replay()
        out = self.outputs[bs][:n]
        self.audit_log.append(out)  # HAZARD: static-address
        return out.clone()  # CLEAN: cloned before the next replay
