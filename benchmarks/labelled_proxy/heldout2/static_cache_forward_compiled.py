"""Static KV cache decoder whose forward is swapped for a reduce-overhead compiled version,
the way HF-style generation code does `model.forward = torch.compile(model.forward, ...)`."""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

logger = logging.getLogger(__name__)


class StaticCacheDecoder(nn.Module):
    def __init__(self, vocab=32000, dim=2048, heads=16, max_len=4096, batch=4):
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.embed = nn.Embedding(vocab, dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        shape = (batch, heads, max_len, dim // heads)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=torch.bfloat16), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape, dtype=torch.bfloat16), persistent=False)
        self.register_buffer("mask_buf", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)), persistent=False)
        self.seen_tokens = 0

    def forward(self, input_ids, cache_position):
        logger.debug("decode forward")  # HAZARD: host-code
        b, t = input_ids.shape
        h = self.embed(input_ids)
        q, k, v = self.qkv(h).view(b, t, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
        self.k_cache.index_copy_(2, cache_position, k.to(self.k_cache.dtype))  # CLEAN: in-place write into a static cache buffer
        self.v_cache.index_copy_(2, cache_position, v.to(self.v_cache.dtype))
        kv_len = int(cache_position[-1]) + 1  # HAZARD: host-sync
        mask = self.mask_buf[None, None, cache_position, : self.seen_tokens + t]  # HAZARD: dynamic-shape
        self.seen_tokens += t
        k_all, v_all = self.k_cache[:, :, :kv_len], self.v_cache[:, :, :kv_len]
        y = F.scaled_dot_product_attention(q, k_all.to(q.dtype), v_all.to(q.dtype), attn_mask=mask)
        return self.lm_head(self.out(y.transpose(1, 2).reshape(b, t, -1)))


@torch.no_grad()
def generate(model, prompt_ids, max_new_tokens=128, eos_id=2):
    model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=False)
    b, t = prompt_ids.shape
    cache_position = torch.arange(t, device=prompt_ids.device)
    logits = model(prompt_ids, cache_position)
    next_tok = logits[:, -1].argmax(-1, keepdim=True)
    generated = [next_tok.clone()]
    cache_position = cache_position[-1:] + 1
    for _ in range(max_new_tokens - 1):
        logits = model(next_tok, cache_position)
        next_tok = logits[:, -1].argmax(-1, keepdim=True)
        generated.append(next_tok.clone())  # CLEAN: output cloned before it can be overwritten
        cache_position = cache_position + 1  # CLEAN: fresh input tensors are copied into the graph's inputs by cudagraph trees
        if (next_tok == eos_id).all():
            break
    return torch.cat(generated, dim=-1)
