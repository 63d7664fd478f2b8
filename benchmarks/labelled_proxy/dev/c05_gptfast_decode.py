"""gpt-fast style generation: compiled one-token decode with a static KV cache."""
import logging
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

logger = logging.getLogger("generate")


class KVCache(nn.Module):
    def __init__(self, bsz, n_heads, max_len, head_dim, dtype=torch.bfloat16):
        super().__init__()
        shape = (bsz, n_heads, max_len, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype))

    def update(self, input_pos, k, v):
        self.k_cache.index_copy_(2, input_pos, k)  # CLEAN: in-place update of a module buffer (static input)
        self.v_cache.index_copy_(2, input_pos, v)
        return self.k_cache, self.v_cache


class TinyLM(nn.Module):
    def __init__(self, vocab=32000, dim=512, n_heads=8, max_len=2048):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.tok = nn.Embedding(vocab, dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, vocab, bias=False)
        self.kv = KVCache(1, n_heads, max_len, self.head_dim)
        self.register_buffer("causal", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))
        self.calls = 0

    def forward(self, idx, input_pos):
        self.calls += 1  # HAZARD: host-code
        b, t = idx.shape
        q, k, v = self.qkv(self.tok(idx)).view(b, t, 3, self.n_heads, self.head_dim).unbind(2)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        k, v = self.kv.update(input_pos, k, v)
        mask = self.causal[None, None, input_pos]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(y.transpose(1, 2).reshape(b, t, -1))


def sample(logits, temperature: float = 0.8):
    probs = torch.softmax(logits / max(temperature, 1e-5), dim=-1)
    q = torch.empty_like(probs).exponential_(1)
    return torch.argmax(probs / q, dim=-1, keepdim=True)


def prefill(model, idx, input_pos):
    logger.debug("prefill %d tokens", idx.shape[1])  # CLEAN: prefill is compiled without cudagraphs
    return sample(model(idx, input_pos)[:, -1])


def decode_one_token(model, cur, input_pos):
    logits = model(cur, input_pos)
    return sample(logits[:, -1]), logits


def generate(model, prompt, max_new_tokens):
    t = prompt.shape[1]
    input_pos = torch.arange(t, device=prompt.device)
    cur = prefill(model, prompt, input_pos)
    input_pos = torch.tensor([t], device=prompt.device)
    tokens, all_logits = [cur], []
    for _ in range(max_new_tokens):
        nxt, logits = decode_one_token(model, cur, input_pos)
        input_pos += 1  # CLEAN: device tensor bumped in place outside the compiled function
        all_logits.append(logits)  # HAZARD: static-address
        cur = nxt.clone()  # CLEAN: output cloned before the next replay
        tokens.append(cur)
    return torch.cat(tokens, dim=1), all_logits


def main():
    global decode_one_token, prefill
    model = TinyLM().cuda().to(torch.bfloat16).eval()
    decode_one_token = torch.compile(decode_one_token, mode="reduce-overhead", fullgraph=True)
    prefill = torch.compile(prefill, dynamic=True)
    prompt = torch.randint(0, 32000, (1, 16), device="cuda")
    with torch.no_grad():
        t0 = time.perf_counter()
        out, _ = generate(model, prompt, 200)
        torch.cuda.synchronize()
    print(f"{200 / (time.perf_counter() - t0):.1f} tok/s", out.shape)


if __name__ == "__main__":
    main()
