"""Invalid-traffic (IVT) scoring for an ad exchange's click stream.

Each click comes with the last 20 events of its device (inter-click gaps,
pointer travel, dwell, viewport flags, ...). A GRU scores bot likelihood. The
scoring method is wrapped by a decorator that captures it into a CUDA graph on
its first call and replays it afterwards.
"""
import functools
from datetime import datetime, timezone

import torch
import torch.nn as nn

T, F_IN = 20, 14


def cuda_graphed(method):
    """Capture `method` into a CUDA graph on its first call, replay it afterwards."""
    @functools.wraps(method)
    def wrapper(self, *args):
        state = self.__dict__.setdefault("_graph_state", {})
        if method.__name__ not in state:
            static_in = [a.clone() for a in args]
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):  # HAZARD: api-misuse
                static_out = method(self, *static_in)
            state[method.__name__] = (g, static_in, static_out)
        g, static_in, static_out = state[method.__name__]
        for s, a in zip(static_in, args):
            s.copy_(a)  # CLEAN: copy_ into the captured inputs
        g.replay()
        return static_out
    return wrapper


class ClickEncoder(nn.Module):
    def __init__(self, hidden: int = 64):
        super().__init__()
        self.inp = nn.Linear(F_IN, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, 1)

    def forward(self, x):
        h, _ = self.gru(torch.relu(self.inp(x)))
        return self.out(h[:, -1]).squeeze(-1)


class IVTScorer:
    def __init__(self, known_bot_ua: torch.Tensor):
        self.model = ClickEncoder().cuda().eval()
        self.bot_ua = known_bot_ua.cuda()                   # hashed user agents from the IAB list
        self.tie_gen = torch.Generator(device="cuda")
        self.tie_gen.manual_seed(2)
        self.night_boost = 0.15
        self.bot_alerts = torch.zeros((), device="cuda")

    @torch.no_grad()
    @cuda_graphed
    def score(self, clicks, ua_hash):
        p = torch.sigmoid(self.model(clicks))
        # tiny dither so equal scores do not always rank the same publisher first
        p = p + 1e-6 * torch.rand(p.shape, device=p.device, generator=self.tie_gen)  # HAZARD: rng
        hour = datetime.now(timezone.utc).hour  # HAZARD: host-code
        if 1 <= hour <= 5:
            p = p + self.night_boost * (1 - p)
        known_bot = (ua_hash[:, None] == self.bot_ua[None, :]).any(1)
        p = torch.where(known_bot, torch.ones_like(p), p)  # CLEAN: torch.where on device
        if (p > 0.99).any():  # HAZARD: dynamic-control-flow
            self.bot_alerts += (p > 0.99).sum()
        return p

    def decide(self, clicks, ua_hash, block_thr=0.9):
        p = self.score(clicks, ua_hash)
        verdict = p.masked_fill(p < block_thr, 0.0)
        return verdict.cpu()


def stream_scores(scorer: IVTScorer, batches):
    billed, blocked = 0, 0
    for clicks, ua_hash in batches:
        v = scorer.decide(clicks, ua_hash)
        blocked += int((v > 0).sum())  # CLEAN: host-side count on a CPU tensor
        billed += v.numel()
    return billed - blocked, blocked, float(scorer.bot_alerts)


if __name__ == "__main__":
    scorer = IVTScorer(torch.randint(0, 2**31, (500,)))
    batches = [(torch.randn(2048, T, F_IN, device="cuda"), torch.randint(0, 2**31, (2048,), device="cuda"))
               for _ in range(5)]
    print(stream_scores(scorer, batches))
