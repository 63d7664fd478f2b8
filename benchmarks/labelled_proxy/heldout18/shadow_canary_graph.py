"""MLOps shadow deployment for a fraud-score service.

Production and candidate models score the same traffic inside one CUDA graph; the
graph also accumulates their divergence on the device and marks a sample of rows for
the offline review queue. The rollout controller polls `rollout_decision()`.
"""
import logging

import torch
import torch.nn as nn

log = logging.getLogger("shadow")


class ShadowCanary:
    def __init__(self, prod: nn.Module, candidate: nn.Module, batch: int, feat_dim: int,
                 sample_rate: float = 0.05):
        self.prod = prod.cuda().eval()
        self.candidate = candidate.cuda().eval()
        self.sample_rate = sample_rate
        self.sampler = torch.Generator(device="cuda")
        self.sampler.manual_seed(20240611)
        self.shadow_stream = torch.cuda.Stream()
        self.static_x = torch.zeros(batch, feat_dim, device="cuda")
        self.sampled = torch.zeros(batch, dtype=torch.bool, device="cuda")
        self.div_sum = torch.zeros((), device="cuda")
        self.div_rows = torch.zeros((), device="cuda")
        self.last_div = 0.0
        self.graph = None

    def _step(self):
        prod_out = self.prod(self.static_x)
        self.shadow_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.shadow_stream):  # HAZARD: stream
            cand_out = self.candidate(self.static_x)
        div = (prod_out.softmax(-1) - cand_out.softmax(-1)).abs().sum(-1)
        pick = torch.rand(div.shape, device=div.device, generator=self.sampler) < self.sample_rate  # HAZARD: rng
        self.sampled.copy_(pick | (div > 0.5))
        self.div_sum.add_(div.sum())
        self.div_rows.add_(div.numel())
        self.last_div = div.mean().item()  # HAZARD: host-sync
        return prod_out

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        self.div_sum.zero_()
        self.div_rows.zero_()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_out = self._step()

    @torch.no_grad()
    def serve(self, x):
        n = x.size(0)
        self.static_x[:n].copy_(x)  # CLEAN: copy_ into the static input
        self.static_x[n:].zero_()
        self.graph.replay()
        flagged = self.sampled[:n].clone()
        return self.static_out[:n].clone(), flagged  # CLEAN: outputs cloned before the next replay

    # -- rollout controller -----------------------------------------------------
    def swap_candidate(self, new_candidate: nn.Module):
        """Deploy a new candidate build without re-capturing."""
        self.candidate = new_candidate.cuda().eval()  # HAZARD: static-address
        self.div_sum.zero_()
        self.div_rows.zero_()

    def refresh_candidate(self, state_dict):
        """Same architecture, new weights (nightly retrain)."""
        self.candidate.load_state_dict(state_dict)  # CLEAN: load_state_dict copies into the captured parameters
        self.div_sum.zero_()
        self.div_rows.zero_()

    def rollout_decision(self, max_div=0.02, min_rows=50_000):
        rows = self.div_rows.item()  # CLEAN: host read outside the graph, between replays
        if rows < min_rows:
            return "wait"
        mean_div = (self.div_sum / rows).item()
        log.info("shadow divergence %.4f over %d rows", mean_div, int(rows))
        return "promote" if mean_div < max_div else "rollback"
