"""MaskGIT class-conditional ImageNet 256 sampling: bidirectional transformer over 16x16 VQ tokens,
8 parallel decoding steps with a cosine mask schedule.

The assistant added a `@cuda_graphed` decorator ("capture on first call, replay afterwards")
and put it on the decoding step.
"""
import functools
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

MASK_ID, N_TOK, CODEBOOK = 1024, 256, 1024


def cuda_graphed(warmup=3):
    def deco(fn):
        cache = {}

        @functools.wraps(fn)
        def wrapper(self, *args):
            key = tuple(a.shape for a in args if torch.is_tensor(a))
            if key not in cache:
                static = [a.clone() if torch.is_tensor(a) else a for a in args]
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):  # CLEAN: forked warm-up stream
                    for _ in range(warmup):
                        fn(self, *static)
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    out = fn(self, *static)
                cache[key] = (g, static, out)
            g, static, out = cache[key]
            for dst, src in zip(static, args):
                if torch.is_tensor(src):
                    dst.copy_(src)  # CLEAN: copy_ into the captured inputs
            g.replay()
            return out
        return wrapper
    return deco


class BidirectionalTransformer(nn.Module):
    def __init__(self, d=768, layers=12, heads=12, n_classes=1000):
        super().__init__()
        self.tok = nn.Embedding(CODEBOOK + 1 + n_classes, d)
        self.pos = nn.Parameter(torch.zeros(1, N_TOK + 1, d))
        self.heads = heads
        self.ln = nn.ModuleList(nn.LayerNorm(d) for _ in range(2 * layers))
        self.qkv = nn.ModuleList(nn.Linear(d, 3 * d) for _ in range(layers))
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)) for _ in range(layers))
        self.out = nn.Linear(d, CODEBOOK)

    def forward(self, tokens, labels):
        x = torch.cat([self.tok(labels + CODEBOOK + 1).unsqueeze(1), self.tok(tokens)], 1) + self.pos
        b, n, _ = x.shape
        for i, (qkv, mlp) in enumerate(zip(self.qkv, self.mlp)):
            q, k, v = qkv(self.ln[2 * i](x)).view(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            x = x + F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2)
            x = x + mlp(self.ln[2 * i + 1](x))
        return self.out(x[:, 1:])


class MaskGITSampler:
    def __init__(self, model, steps=8, temp=4.5, seed=0):
        self.model, self.T, self.temp = model.cuda().eval(), steps, temp
        self.gen = torch.Generator(device="cuda").manual_seed(seed)

    @torch.no_grad()
    @cuda_graphed(warmup=3)
    def decode_step(self, tokens, labels, step):
        unknown = tokens == MASK_ID
        if not unknown.any():  # HAZARD: dynamic-control-flow
            return tokens
        logits = self.model(tokens, labels)
        probs = F.softmax(logits, -1)
        sampled = torch.multinomial(probs.view(-1, CODEBOOK), 1).view(tokens.shape)  # CLEAN: default generator
        conf = probs.gather(-1, sampled.unsqueeze(-1)).squeeze(-1)
        ratio = math.cos(math.pi / 2 * (step + 1) / self.T)  # HAZARD: python-scalar
        n_mask = max(1, int(ratio * N_TOK))
        g = -torch.log(-torch.log(torch.rand(conf.shape, device=conf.device, generator=self.gen) + 1e-20) + 1e-20)  # HAZARD: rng
        conf = torch.where(unknown, torch.log(conf) + self.temp * (1 - ratio) * g, torch.full_like(conf, float("inf")))
        thresh = conf.sort(-1).values[:, n_mask - 1 : n_mask]  # CLEAN: sort + slice instead of a host read
        tokens = torch.where(unknown, sampled, tokens)
        return torch.where(conf <= thresh, torch.full_like(tokens, MASK_ID), tokens)

    def sample(self, labels, keep_history=False):
        tokens = torch.full((labels.shape[0], N_TOK), MASK_ID, device="cuda")
        history = []
        for t in range(self.T):
            tokens = self.decode_step(tokens, labels, t)
            if keep_history:
                history.append(tokens)  # HAZARD: static-address
        return tokens.clone(), history  # CLEAN: final tokens cloned before the next replay


def make_grid(sampler, vqgan, classes):
    labels = torch.tensor(classes, device="cuda")  # CLEAN: eager upload, outside the graph
    tokens, steps = sampler.sample(labels, keep_history=True)
    with torch.no_grad():
        imgs = [vqgan.decode(t.view(-1, 16, 16)) for t in steps + [tokens]]
    return torch.cat(imgs, dim=-1)
