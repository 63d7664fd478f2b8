"""Continuous batching for a token-based time-series forecaster (Chronos-style).

Series are mean-scaled, quantised into bins and decoded autoregressively one step at
a time.  Requests join and leave a fixed slot table; the per-step decode is captured
through a small `graph_step` context manager shared by all forecasters on the box.
"""
import contextlib

import numpy as np
import torch
import torch.nn.functional as F

_POOL = None


@contextlib.contextmanager
def graph_step(graph: torch.cuda.CUDAGraph, stream: torch.cuda.Stream):
    global _POOL
    if _POOL is None:
        _POOL = torch.cuda.graph_pool_handle()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.graph(graph, pool=_POOL, stream=stream):  # HAZARD: api-misuse
        yield
    torch.cuda.current_stream().wait_stream(stream)


class SlotBatcher:
    def __init__(self, model, slots=256, context=512, n_bins=4094):
        self.model = model.cuda().eval()
        self.slots, self.context = slots, context
        self.tokens = torch.zeros(slots, context, dtype=torch.long, device="cuda")
        self.scale = torch.ones(slots, 1, device="cuda")
        self.active = torch.zeros(slots, dtype=torch.bool, device="cuda")
        self.steps_done = torch.zeros(slots, dtype=torch.long, device="cuda")
        self.horizon_t = torch.zeros(slots, dtype=torch.long, device="cuda")
        self.centers = torch.linspace(-15, 15, n_bins, device="cuda")
        self.boundaries = (self.centers[1:] + self.centers[:-1]) / 2
        self.next_value = torch.zeros(slots, device="cuda")
        self.stream = torch.cuda.Stream()
        self.graph = torch.cuda.CUDAGraph()
        self.top_k = 50
        self.bin_prior = np.zeros(n_bins, dtype=np.float32)

    def _decode_step(self):
        with torch.autocast("cuda", dtype=torch.bfloat16):  # CLEAN: autocast entered inside the capture
            logits = self.model(self.tokens)[:, -1].float()
        logits = logits + torch.from_numpy(self.bin_prior).cuda(non_blocking=True)  # HAZARD: pinned-memory
        v, i = logits.topk(self.top_k, dim=-1)  # CLEAN: fixed k, never changed
        probs = F.softmax(v, dim=-1)
        pick = torch.multinomial(probs, 1)  # CLEAN: default-generator RNG is captured
        tie = np.random.default_rng().random()  # HAZARD: host-code
        tok = i.gather(1, pick).squeeze(1)
        tok = torch.where(self.active, tok, torch.zeros_like(tok))
        self.tokens.copy_(torch.cat([self.tokens[:, 1:], tok[:, None]], dim=1))
        self.next_value.copy_(self.centers[tok] * self.scale.squeeze(1) + tie * 1e-6)
        self.steps_done.add_(self.active.long())
        finished = (self.steps_done >= self.horizon_t).nonzero()  # HAZARD: dynamic-shape
        self.active[finished.squeeze(1)] = False

    @torch.no_grad()
    def build(self):
        with graph_step(self.graph, self.stream):
            self._decode_step()

    @torch.no_grad()
    def admit(self, slot: int, series: np.ndarray, horizon: int):
        x = torch.as_tensor(series[-self.context:], dtype=torch.float32).cuda()  # CLEAN: eager admission, outside the graph
        s = x.abs().mean().clamp_min(1e-6)
        q = torch.bucketize(x / s, self.boundaries)
        self.tokens[slot].zero_()
        self.tokens[slot, -q.numel():] = q
        self.scale[slot] = s
        self.steps_done[slot] = 0
        self.horizon_t[slot] = horizon
        self.active[slot] = True

    @torch.no_grad()
    def tick(self):
        self.graph.replay()
        return self.next_value.clone()  # CLEAN: cloned before the next replay

    def drain(self):
        done = (~self.active).cpu().numpy()  # CLEAN: host read between replays
        return np.flatnonzero(done)
