"""Learned cache admission for a CDN edge node (LRB-style).

On each miss, a small MLP predicts whether the object will be requested again
within the cache's eviction horizon; only likely re-requests are admitted. The
model learns online from the request log. Compilation settings come from a
dataclass so that the staging fleet can run without CUDA graphs.
"""
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

FEAT = 23


@dataclass
class EdgeConfig:
    compile_mode: str = "max-autotune"
    lr: float = 1e-3
    admit_threshold: float = 0.5
    batch: int = 1024


PRODUCTION = EdgeConfig()
STAGING = EdgeConfig(compile_mode="max-autotune-no-cudagraphs")


class AdmissionNet(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.f = nn.Sequential(nn.Linear(FEAT + 1, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 1))

    def forward(self, x):
        return self.f(x).squeeze(-1)


class AdmissionPolicy:
    def __init__(self, cfg, device="cuda"):
        self.cfg = cfg
        self.net = AdmissionNet().to(device)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=cfg.lr)
        self.decide = torch.compile(self._decide, mode=cfg.compile_mode)
        self.update_step = torch.compile(self.opt.step, mode=cfg.compile_mode)
        self.t0 = time.time()  # CLEAN: host clock read at start-up, outside the compiled code

    def _decide(self, feats, last_seen):
        now = time.time() - self.t0  # HAZARD: host-code
        age = (now - last_seen).clamp_min(0).log1p()
        p = torch.sigmoid(self.net(torch.cat([feats, age.unsqueeze(-1)], -1)))
        admit = p > self.cfg.admit_threshold
        return p, admit.tolist()  # HAZARD: host-sync

    @torch.no_grad()
    def on_misses(self, feats, last_seen):
        return self.decide(feats, last_seen)  # HAZARD: dynamic-shape

    @torch.no_grad()
    def on_misses_padded(self, feats, last_seen):
        n = feats.shape[0]
        feats = F.pad(feats, (0, 0, 0, self.cfg.batch - n))
        last_seen = F.pad(last_seen, (0, self.cfg.batch - n))
        p, admit = self.decide(feats, last_seen)  # CLEAN: padded to the configured batch, one graph
        return p[:n].clone(), admit[:n]

    def learn(self, feats, age, rerequested, hour):
        p = torch.sigmoid(self.net(torch.cat([feats, age.unsqueeze(-1)], -1)))
        loss = F.binary_cross_entropy(p, rerequested)
        loss.backward()
        self.update_step()
        self.opt.zero_grad(set_to_none=False)
        peak = hour in (19, 20, 21, 22)  # evening video peak: learn more slowly
        for group in self.opt.param_groups:
            group["lr"] = self.cfg.lr * (0.5 if peak else 1.0)  # HAZARD: optimizer
        return loss.detach()


def edge_loop(policy, cache, log_reader):
    while True:
        misses = cache.drain_misses()
        p, admit = policy.on_misses(misses.feats, misses.last_seen)
        cache.admit([k for k, a in zip(misses.keys, admit) if a])
        for feats, age, y in log_reader.labelled_since_last_tick():
            policy.learn(feats, age, y, hour=time.localtime().tm_hour)


def staging_replay(trace):
    policy = AdmissionPolicy(STAGING)
    for feats, last_seen in trace:
        policy.on_misses(feats, last_seen)  # CLEAN: staging config compiles without CUDA graphs
