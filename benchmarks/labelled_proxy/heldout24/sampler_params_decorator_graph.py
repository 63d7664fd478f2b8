"""Batched token sampler with per-request sampling parameters for a multi-tenant API.

Temperature, top-p and top-k are per-row device tensors, so one graph serves any mix
of requests.  `@cuda_graphed` captures the decorated method on its first call per
batch size (after warm-up) and replays it afterwards.
"""
import functools

import torch


def cuda_graphed(warmup=2):
    def deco(fn):
        graphs = {}

        @functools.wraps(fn)
        def wrapper(self, logits):
            key = tuple(logits.shape)
            if key not in graphs:
                static_in = logits.clone()
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(warmup):
                        fn(self, static_in)
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, stream=s):  # CLEAN: warmed up on the same side stream
                    static_out = fn(self, static_in)
                graphs[key] = (g, static_in, static_out)
            g, static_in, static_out = graphs[key]
            static_in.copy_(logits)  # CLEAN: copy into the static input
            g.replay()
            return static_out
        return wrapper
    return deco


class BatchSampler:
    def __init__(self, max_batch=256, vocab=128256, top_k_cap=64):
        self.temperature = torch.ones(max_batch, 1, device="cuda")
        self.top_p = torch.ones(max_batch, 1, device="cuda")
        self.top_k = torch.full((max_batch, 1), top_k_cap, device="cuda")
        self.top_k_cap = top_k_cap
        self.presence = torch.zeros(max_batch, vocab, device="cuda")
        self.special = [0, 1, 2]
        self.cfg = {"presence_penalty": 0.0, "banned": list(self.special), "seed": 0}

    @cuda_graphed(warmup=2)
    def sample(self, logits):
        b = logits.shape[0]
        torch.manual_seed(self.cfg["seed"])  # HAZARD: rng
        pen = self.cfg["presence_penalty"]  # HAZARD: python-scalar
        logits = logits - pen * (self.presence[:b] > 0)
        banned = self.cfg["banned"]
        logits[:, banned] = float("-inf")  # HAZARD: host-sync
        logits = logits / self.temperature[:b].clamp_min(1e-5)
        vals, idx = logits.topk(self.top_k_cap, dim=-1)  # CLEAN: fixed cap, per-row k applied as a mask
        ranks = torch.arange(self.top_k_cap, device=logits.device)[None]
        vals = vals.masked_fill(ranks >= self.top_k[:b], float("-inf"))
        probs = torch.softmax(vals, dim=-1)
        cum = probs.cumsum(dim=-1) - probs
        probs = probs.masked_fill(cum > self.top_p[:b], 0.0)  # CLEAN: device-side top-p
        pick = torch.multinomial(probs, 1)  # CLEAN: default CUDA generator
        return idx.gather(1, pick).squeeze(1)

    def configure(self, rows, requests):
        for r, req in zip(rows, requests):
            self.temperature[r] = req.get("temperature", 1.0)
            self.top_p[r] = req.get("top_p", 1.0)
            self.top_k[r] = min(req.get("top_k", self.top_k_cap), self.top_k_cap)
        self.cfg["presence_penalty"] = max(req.get("presence_penalty", 0.0) for req in requests)
        self.cfg["banned"] = sorted(set(self.special) | {t for req in requests for t in req.get("banned", [])})
        self.cfg["seed"] = requests[0].get("seed", 0)


def decode_loop(model, sampler: BatchSampler, ids, steps):
    history = []
    for _ in range(steps):
        logits = model(ids)[:, -1].float()
        tok = sampler.sample(logits)
        history.append(tok)  # HAZARD: static-address
        sampler.presence.scatter_(1, tok[:, None].long(), 1.0)
        ids = torch.cat([ids, tok[:, None]], dim=1)
    return torch.stack(history, 1)
