from dataclasses import dataclass, field
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class GenerationConfig:
    max_len: int = 512
    n_layers: int = 4
    n_heads: int = 8
    head_dim: int = 64
    dtype: torch.dtype = torch.float16
    eos_ids: List[int] = field(default_factory=lambda: [2])


class StaticKVCache:
    def __init__(self, cfg: GenerationConfig, batch: int = 1):
        shape = (batch, cfg.n_heads, cfg.max_len, cfg.head_dim)
        self.k = [torch.zeros(shape, dtype=cfg.dtype, device="cuda") for _ in range(cfg.n_layers)]
        self.v = [torch.zeros(shape, dtype=cfg.dtype, device="cuda") for _ in range(cfg.n_layers)]
        self.length = 0

    def update(self, layer: int, k_new, v_new, pos):
        self.k[layer].index_copy_(2, pos, k_new)  # CLEAN: in-place write into a preallocated cache buffer
        self.v[layer].index_copy_(2, pos, v_new)
        if layer == 0:
            self.length += 1  # HAZARD: host-code
        return self.k[layer], self.v[layer]


class Decoder(nn.Module):
    def __init__(self, cfg: GenerationConfig, vocab=32000):
        super().__init__()
        d = cfg.n_heads * cfg.head_dim
        self.cfg = cfg
        self.embed = nn.Embedding(vocab, d)
        self.qkv = nn.ModuleList([nn.Linear(d, 3 * d) for _ in range(cfg.n_layers)])
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.register_buffer("pos_buf", torch.zeros(1, dtype=torch.long), persistent=False)

    def forward(self, token, cache: StaticKVCache):
        pos = self.pos_buf
        step = int(pos[0])  # HAZARD: host-sync
        mask = (torch.arange(self.cfg.max_len) <= step).to("cuda")  # HAZARD: pinned-memory
        h = self.embed(token)
        B, H, D = h.shape[0], self.cfg.n_heads, self.cfg.head_dim
        for i, proj in enumerate(self.qkv):
            q, k, v = proj(h).view(B, 1, 3, H, D).unbind(2)
            k_all, v_all = cache.update(i, k.transpose(1, 2), v.transpose(1, 2), pos)
            h = h + F.scaled_dot_product_attention(q.transpose(1, 2), k_all, v_all, attn_mask=mask).transpose(1, 2).reshape(B, 1, H * D)
        self.pos_buf = pos + 1  # HAZARD: static-address
        return self.lm_head(h[:, -1])


def build_graph(model: Decoder, cache: StaticKVCache):
    token = torch.zeros(1, 1, dtype=torch.long, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(2):
            model(token, cache)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        with torch.cuda.graph(g):
            logits = model(token, cache)
    return g, token, logits


def generate(model: Decoder, prompt_tail: int, steps: int) -> torch.Tensor:
    cache = StaticKVCache(model.cfg)
    g, token, logits = build_graph(model, cache)
    token.fill_(prompt_tail)
    out = []
    for _ in range(steps):
        g.replay()
        nxt = logits.argmax(-1, keepdim=True)
        out.append(logits.clone())  # CLEAN: logits cloned before the next replay overwrites them
        token.copy_(nxt)
    return torch.stack(out)
