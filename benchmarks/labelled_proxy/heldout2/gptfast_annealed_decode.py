"""Single-token decode compiled with reduce-overhead, gpt-fast style, with temperature annealing."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class KVCache(nn.Module):
    def __init__(self, max_seq, heads, head_dim, dtype=torch.bfloat16):
        super().__init__()
        shape = (1, heads, max_seq, head_dim)
        self.register_buffer("k", torch.zeros(shape, dtype=dtype))
        self.register_buffer("v", torch.zeros(shape, dtype=dtype))

    def update(self, input_pos, k, v):
        self.k.index_copy_(2, input_pos, k)
        self.v.index_copy_(2, input_pos, v)
        return self.k, self.v


class Attention(nn.Module):
    def __init__(self, dim=2048, heads=16, max_seq=2048):
        super().__init__()
        self.heads, self.head_dim, self.max_seq = heads, dim // heads, max_seq
        self.wqkv = nn.Linear(dim, 3 * dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.cache = KVCache(max_seq, heads, dim // heads)
        self.register_buffer("causal", torch.tril(torch.ones(max_seq, max_seq, dtype=torch.bool)))

    def forward(self, x, input_pos):
        if input_pos.max() >= self.max_seq:  # HAZARD: dynamic-control-flow
            raise IndexError("KV cache overflow")
        b, t, _ = x.shape
        q, k, v = self.wqkv(x).view(b, t, 3, self.heads, self.head_dim).unbind(2)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        k, v = self.cache.update(input_pos, k, v)
        mask = self.causal[None, None, input_pos]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.wo(y.transpose(1, 2).reshape(b, t, -1))


class TinyGPT(nn.Module):
    def __init__(self, vocab=32000, dim=2048, n_layers=4):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Attention(dim) for _ in range(n_layers))
        self.norm = nn.RMSNorm(dim)
        self.out = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx, input_pos):
        x = self.tok(idx)
        for layer in self.layers:
            x = x + layer(x, input_pos)
        return self.out(self.norm(x))


def multinomial_sample_one_no_sync(probs):
    q = torch.empty_like(probs).exponential_(1)
    return torch.argmax(probs / q, dim=-1, keepdim=True).to(dtype=torch.int)  # CLEAN: sampling stays on device, no sync


def logits_to_probs(logits, temperature: float = 1.0, top_k=None):
    logits = logits / max(temperature, 1e-5)  # HAZARD: python-scalar
    if top_k is not None:
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        logits = torch.where(logits < v[..., -1:], -float("inf"), logits)
    return F.softmax(logits, dim=-1)


def decode_one_token(model, x, input_pos, temperature, top_k):
    logits = model(x, input_pos)
    probs = logits_to_probs(logits[:, -1], temperature, top_k)
    return multinomial_sample_one_no_sync(probs), probs


def prefill(model, x, input_pos, top_k):
    logits = model(x, input_pos)
    if (input_pos >= 2048).any().item():  # CLEAN: prefill uses default torch.compile, no CUDA graphs
        raise IndexError("prompt too long")
    return multinomial_sample_one_no_sync(logits_to_probs(logits[:, -1], 1.0, top_k))


decode_one_token = torch.compile(decode_one_token, mode="reduce-overhead", fullgraph=True)
prefill = torch.compile(prefill, dynamic=True)


@torch.no_grad()
def generate(model: TinyGPT, prompt, max_new_tokens, temperature=0.9, anneal=0.97, top_k=200):
    T = prompt.size(0)
    input_pos = torch.arange(0, T, device=prompt.device)
    tok = prefill(model, prompt.view(1, -1), input_pos, top_k)
    seq = [tok.clone()]
    input_pos = torch.tensor([T], device=prompt.device, dtype=torch.long)
    cur = tok.view(1, -1)
    confidences = []
    for i in range(max_new_tokens - 1):
        temp_i = temperature * (anneal ** i)
        nxt, probs = decode_one_token(model, cur, input_pos, temp_i, top_k)
        input_pos += 1
        cur = nxt.clone().view(1, -1)  # CLEAN: output cloned before the next replay overwrites it
        seq.append(nxt)  # HAZARD: static-address
        confidences.append(probs.max().item())
    return torch.cat(seq, dim=-1), confidences
