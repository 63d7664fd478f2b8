"""HF-style generate loop: static cache, compiled forward held on self.model."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class StaticCacheLM(nn.Module):
    def __init__(self, vocab=32000, dim=768, max_len=1024, bsz=8):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.lm = nn.Linear(dim, vocab, bias=False)
        self.register_buffer("k", torch.zeros(bsz, max_len, dim))
        self.register_buffer("v", torch.zeros(bsz, max_len, dim))
        self.max_len = max_len

    def forward(self, ids, cache_position, attention_mask, cur_len: int):
        h = self.emb(ids)
        k, v = self.kv(h).chunk(2, -1)
        self.k.index_copy_(1, cache_position, k)
        self.v.index_copy_(1, cache_position, v)
        keys = self.k[:, :cur_len]  # HAZARD: python-scalar
        vals = self.v[:, :cur_len]  # HAZARD: python-scalar
        mask = attention_mask[:, None, :cur_len].bool()  # HAZARD: python-scalar
        y = F.scaled_dot_product_attention(self.q(h)[:, None], keys[:, None], vals[:, None], attn_mask=mask[:, None])
        return self.lm(y.squeeze(1))


class Generator:
    def __init__(self, model, eos_id=2):
        self.model = torch.compile(model, mode="reduce-overhead", fullgraph=True)
        self.eos_id = eos_id

    @torch.inference_mode()
    def generate(self, prompt_ids, max_new_tokens=64):
        bsz, t = prompt_ids.shape
        attn = torch.zeros(bsz, self.model.max_len, device="cuda")
        attn[:, :t] = 1
        ids = prompt_ids[:, -1:]
        unfinished = torch.ones(bsz, dtype=torch.bool, device="cuda")
        out = [prompt_ids]
        prev_logits = None
        for step in range(max_new_tokens):
            pos = torch.tensor([t + step], device="cuda")
            attn[:, t + step] = 1
            logits = self.model(ids, pos, attn, t + step + 1)
            if prev_logits is not None:
                drift = (logits - prev_logits).abs().mean()
            prev_logits = logits  # HAZARD: static-address
            ids = logits[:, -1:].argmax(-1)
            unfinished &= ids.squeeze(-1) != self.eos_id
            out.append(ids)
            if not unfinished.any():  # CLEAN: eager stopping check between compiled calls
                break
        return torch.cat(out, dim=1)
