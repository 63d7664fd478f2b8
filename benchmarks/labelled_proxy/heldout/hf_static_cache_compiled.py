import torch
import torch.nn as nn
import torch.nn.functional as F


class StaticCache(nn.Module):
    def __init__(self, n_layers, batch, heads, max_len, head_dim, dtype=torch.bfloat16):
        super().__init__()
        for i in range(n_layers):
            self.register_buffer(f"k_{i}", torch.zeros(batch, heads, max_len, head_dim, dtype=dtype), persistent=False)
            self.register_buffer(f"v_{i}", torch.zeros(batch, heads, max_len, head_dim, dtype=dtype), persistent=False)
        self.seen_tokens = 0

    def update(self, layer_idx, k, v, cache_position):
        k_buf, v_buf = getattr(self, f"k_{layer_idx}"), getattr(self, f"v_{layer_idx}")
        k_buf.index_copy_(2, cache_position, k)  # CLEAN: in-place update of a registered buffer (static input)
        v_buf.index_copy_(2, cache_position, v)
        if layer_idx == 0:
            self.seen_tokens += k.shape[2]  # HAZARD: host-code
        return k_buf, v_buf


class Attention(nn.Module):
    def __init__(self, layer_idx, d_model, heads):
        super().__init__()
        self.layer_idx, self.heads = layer_idx, heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.o = nn.Linear(d_model, d_model, bias=False)
        self.past = None

    def forward(self, x, cache, cache_position, attn_mask):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        if cache is not None:
            k, v = cache.update(self.layer_idx, k, v, cache_position)
        else:
            self.past = (k, v) if self.past is None else (torch.cat([self.past[0], k], 2), torch.cat([self.past[1], v], 2))  # HAZARD: static-address
            k, v = self.past
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask[..., : k.shape[2]])
        return self.o(out.transpose(1, 2).reshape(B, T, D))


class TinyLM(nn.Module):
    def __init__(self, vocab=32000, d_model=512, heads=8, n_layers=4, max_len=1024):
        super().__init__()
        self.max_len = max_len
        self.embed = nn.Embedding(vocab, d_model)
        self.layers = nn.ModuleList([Attention(i, d_model, heads) for i in range(n_layers)])
        self.lm_head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, input_ids, cache_position, cache=None):
        cache_position.clamp_(max=self.max_len - 1)  # HAZARD: static-address
        mask = torch.arange(self.max_len, device=input_ids.device)[None, :] <= cache_position[:, None]
        h = self.embed(input_ids)
        for layer in self.layers:
            h = h + layer(h, cache, cache_position, mask[None, None])
        return self.lm_head(h[:, -1])


@torch.no_grad()
def generate(model: TinyLM, prompt_ids, max_new_tokens=128, use_static_cache=True):
    cache = StaticCache(len(model.layers), 1, 8, model.max_len, 64).cuda() if use_static_cache else None
    for i in range(prompt_ids.shape[1]):
        pos = torch.tensor([i], device="cuda")  # CLEAN: built in the eager prefill loop, outside the compiled forward
        logits = model(prompt_ids[:, i : i + 1], pos, cache)
    next_tok = logits.argmax(-1, keepdim=True)
    cache_position = torch.tensor([prompt_ids.shape[1]], device="cuda")
    out = [next_tok]
    for _ in range(max_new_tokens):
        logits = model(next_tok, cache_position, cache)
        next_tok = logits.argmax(-1, keepdim=True)
        out.append(next_tok)
        cache_position.add_(1)  # CLEAN: input advanced in place between calls, outside the compiled forward
    return torch.cat(out, dim=1)


if __name__ == "__main__":
    model = TinyLM().cuda().to(torch.bfloat16).eval()
    model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    prompt = torch.randint(0, 32000, (1, 16), device="cuda")
    fast = generate(model, prompt, use_static_cache=True)
    legacy = generate(model, prompt, max_new_tokens=16, use_static_cache=False)
    print(fast[:, :16].eq(legacy).float().mean().item())
