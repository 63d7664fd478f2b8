"""Llama-style chat generation with a static KV cache and a compiled forward.

`model.forward` is wrapped with torch.compile(mode="reduce-overhead") the way
the static-cache recipe does it; the cache object is handed to every call as
`past_key_values` together with a `cache_position` tensor.
"""
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import AutoTokenizer


@dataclass
class GenerationConfig:
    max_new_tokens: int = 256
    temperature: float = 0.7
    eos_token_ids: list = field(default_factory=lambda: [128001, 128009])


class StaticKVCache:
    """Plain container (not an nn.Module): one preallocated K/V tensor per layer."""

    def __init__(self, cfg, batch, max_cache_len, device, dtype=torch.bfloat16):
        shape = (batch, cfg.num_key_value_heads, max_cache_len, cfg.hidden_size // cfg.num_attention_heads)
        self.max_cache_len = max_cache_len
        self.key_cache = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.num_hidden_layers)]
        self.value_cache = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.num_hidden_layers)]

    def update(self, k, v, layer_idx, cache_position):
        self.key_cache[layer_idx].index_copy_(2, cache_position, k)  # HAZARD: static-address
        self.value_cache[layer_idx].index_copy_(2, cache_position, v)
        return self.key_cache[layer_idx], self.value_cache[layer_idx]


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg, layer_idx):
        super().__init__()
        self.layer_idx, self.cfg = layer_idx, cfg
        hd = cfg.hidden_size // cfg.num_attention_heads
        self.q_proj = nn.Linear(cfg.hidden_size, cfg.num_attention_heads * hd, bias=False)
        self.kv_proj = nn.Linear(cfg.hidden_size, 2 * cfg.num_key_value_heads * hd, bias=False)
        self.o_proj = nn.Linear(cfg.num_attention_heads * hd, cfg.hidden_size, bias=False)
        self.mlp = nn.Sequential(nn.Linear(cfg.hidden_size, cfg.intermediate_size), nn.SiLU(),
                                 nn.Linear(cfg.intermediate_size, cfg.hidden_size))

    def forward(self, h, mask, cache_position, past_key_values):
        b, s, _ = h.shape
        hd = self.cfg.hidden_size // self.cfg.num_attention_heads
        q = self.q_proj(h).view(b, s, -1, hd).transpose(1, 2)
        k, v = self.kv_proj(h).view(b, s, 2, -1, hd).unbind(2)
        k, v = past_key_values.update(k.transpose(1, 2), v.transpose(1, 2), self.layer_idx, cache_position)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        h = h + self.o_proj(a.transpose(1, 2).reshape(b, s, -1))
        return h + self.mlp(h)


class LlamaForCausalLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.config = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList([LlamaDecoderLayer(cfg, i) for i in range(cfg.num_hidden_layers)])
        self.norm = nn.RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    def forward(self, input_ids, cache_position, past_key_values):
        if (cache_position >= past_key_values.max_cache_len).any():  # HAZARD: dynamic-control-flow
            raise ValueError("sequence is longer than the static cache")
        h = self.embed_tokens(input_ids)
        mask = torch.arange(past_key_values.max_cache_len, device=h.device)[None, :] <= cache_position[:, None]
        for layer in self.layers:
            h = layer(h, mask, cache_position, past_key_values)
        return self.lm_head(self.norm(h[:, -1:]))


class ChatSession:
    def __init__(self, model_id, model, device="cuda"):
        self.tok = AutoTokenizer.from_pretrained(model_id)
        self.model, self.device = model.to(device).eval(), device
        self.cache = StaticKVCache(model.config, 1, 4096, device)
        self.model.forward = torch.compile(self.model.forward, mode="reduce-overhead")
        self.sample = torch.compile(self._sample, mode="reduce-overhead")
        self.gen_cfg = GenerationConfig()

    def _sample(self, logits):
        probs = torch.softmax(logits[:, -1] / self.gen_cfg.temperature, dim=-1)  # HAZARD: python-scalar
        return torch.multinomial(probs, num_samples=1)  # CLEAN: multinomial on the default generator is capturable

    @torch.inference_mode()
    def reply(self, messages, temperature=None):
        if temperature is not None:
            self.gen_cfg.temperature = temperature
        ids = self.tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt").to(self.device)
        n = ids.shape[1]
        cache_position = torch.arange(n, device=self.device)
        logits = self.model(ids, cache_position, self.cache)  # HAZARD: dynamic-shape
        token = self.sample(logits[:, -1:].clone()).clone()  # CLEAN: cloned before the next compiled call
        out = [token]
        for pos in range(n, n + self.gen_cfg.max_new_tokens):
            cache_position = torch.tensor([pos], device=self.device)  # CLEAN: built eagerly, outside the compiled forward
            logits = self.model(token, cache_position, self.cache)
            token = self.sample(logits[:, -1:].clone()).clone()
            out.append(token)
            if token.item() in self.gen_cfg.eos_token_ids:  # CLEAN: eager stopping check between compiled calls
                break
        return self.tok.decode(torch.cat(out, dim=1)[0], skip_special_tokens=True)
