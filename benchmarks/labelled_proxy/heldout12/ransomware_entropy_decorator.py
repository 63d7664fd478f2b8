"""Endpoint ransomware detector: scores bursts of file writes per process.

The EDR agent aggregates, per process and per 2 s window, a histogram of the
Shannon entropy of written blocks plus rename / extension-change / delete
counts. A small model scores all active processes; a high score suspends
the process. Scoring is captured on first call by a decorator and replayed.
"""
import dataclasses
import functools
import logging
import time

import torch
import torch.nn as nn

log = logging.getLogger("edr.ransom")
N_PROC, N_BINS, N_PROC_FEATS = 256, 64, 12


def cuda_graphed(warmup=3):
    def deco(method):
        @functools.wraps(method)
        def wrapper(self):
            graphs = self.__dict__.setdefault("_graphs", {})
            if method.__name__ not in graphs:
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(warmup):
                        method(self)
                torch.cuda.current_stream().wait_stream(side)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):  # CLEAN: warmed up on a side stream just above
                    out = method(self)
                graphs[method.__name__] = (g, out)
            g, out = graphs[method.__name__]
            g.replay()
            return out
        return wrapper
    return deco


@dataclasses.dataclass
class Policy:
    block_threshold: float = 0.9
    mode: str = "enforce"


class BurstModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.hist = nn.Sequential(nn.Conv1d(1, 16, 5, padding=2), nn.ReLU(), nn.AdaptiveMaxPool1d(8), nn.Flatten())
        self.mlp = nn.Sequential(nn.Linear(16 * 8 + N_PROC_FEATS, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, hist, feats):
        return self.mlp(torch.cat([self.hist(hist[:, None]), feats], dim=-1))


class WriteBurstScorer:
    def __init__(self, model, policy):
        self.model = model.cuda().eval()
        self.policy = policy
        self.hist = torch.zeros(N_PROC, N_BINS, device="cuda")
        self.feats = torch.zeros(N_PROC, N_PROC_FEATS, device="cuda")
        self.n_flagged = torch.zeros((), dtype=torch.long, device="cuda")
        self.audit_buf = torch.zeros(N_PROC, device="cuda")
        self.audit_stream = torch.cuda.Stream()
        self.peak_risk, self.last_seen = 0.0, 0.0

    @cuda_graphed(warmup=3)
    @torch.no_grad()
    def _score(self):
        log.info("scoring write-burst batch")  # CLEAN: plain-string log, no tensor formatted
        risk = torch.sigmoid(self.model(self.hist, self.feats)).squeeze(-1)
        thr = self.policy.block_threshold  # HAZARD: python-scalar
        verdict = torch.where(risk > thr, 2, torch.where(risk > 0.5 * thr, 1, 0))  # CLEAN: verdict computed on the device
        self.n_flagged.add_((verdict == 2).sum())  # CLEAN: device-side counter
        self.last_seen = time.monotonic()  # HAZARD: host-code
        self.peak_risk = risk.max().item()  # HAZARD: host-sync
        with torch.cuda.stream(self.audit_stream):  # HAZARD: stream
            self.audit_buf.copy_(risk)
        return verdict

    def score(self, hist, feats):
        self.hist.copy_(hist, non_blocking=True)
        self.feats.copy_(feats, non_blocking=True)
        return self._score().cpu()


if __name__ == "__main__":
    scorer = WriteBurstScorer(BurstModel(), Policy())
    for window in range(10_000):
        verdicts = scorer.score(torch.rand(N_PROC, N_BINS).pin_memory(), torch.rand(N_PROC, N_PROC_FEATS).pin_memory())
        for pid_slot in (verdicts == 2).nonzero().flatten().tolist():
            log.warning("suspending process in slot %d", pid_slot)
        if window == 3000:
            scorer.policy.block_threshold = 0.8  # tenant admin tightened the policy from the console
        time.sleep(2.0)
