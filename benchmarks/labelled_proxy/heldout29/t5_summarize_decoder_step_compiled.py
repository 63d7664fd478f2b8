"""T5-style abstractive summarization with a compiled one-token decoder step.

The encoder runs once per batch of articles; the decoder step is compiled with
mode="reduce-overhead" over a preallocated self-attention cache kept in
registered buffers, so every step after the first replays one CUDA graph.
"""
import logging
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

logger = logging.getLogger("summarizer")


@dataclass
class T5Config:
    d_model: int = 512
    num_heads: int = 8
    vocab_size: int = 32128
    max_source_len: int = 512
    max_target_len: int = 128
    decoder_start_token_id: int = 0
    eos_token_id: int = 1


class T5DecoderStep(nn.Module):
    def __init__(self, config, batch_size):
        super().__init__()
        self.config = config
        d, hd = config.d_model, config.d_model // config.num_heads
        self.embed = nn.Embedding(config.vocab_size, d)
        self.self_qkv = nn.Linear(d, 3 * d, bias=False)
        self.cross_q = nn.Linear(d, d, bias=False)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.ReLU(), nn.Linear(4 * d, d))
        self.lm_head = nn.Linear(d, config.vocab_size, bias=False)
        shape = (batch_size, config.num_heads, config.max_target_len, hd)
        self.register_buffer("k_cache", torch.zeros(shape), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape), persistent=False)
        self.temperature = 1.0

    def _heads(self, x):
        return x.view(x.shape[0], -1, self.config.num_heads, self.config.d_model // self.config.num_heads).transpose(1, 2)

    def forward(self, token, cache_position, enc_k, enc_v, enc_mask):
        h = self.embed(token)
        q, k, v = self.self_qkv(h).chunk(3, dim=-1)
        self.k_cache.index_copy_(2, cache_position, self._heads(k))  # CLEAN: in-place write into a registered buffer (static input)
        self.v_cache.index_copy_(2, cache_position, self._heads(v))
        causal = torch.arange(self.config.max_target_len, device=token.device) <= cache_position
        a = F.scaled_dot_product_attention(self._heads(q), self.k_cache, self.v_cache, attn_mask=causal)
        h = h + a.transpose(1, 2).reshape_as(h)
        c = F.scaled_dot_product_attention(self._heads(self.cross_q(h)), enc_k, enc_v, attn_mask=enc_mask)
        h = h + c.transpose(1, 2).reshape_as(h)
        h = h + self.ff(h)
        return self.lm_head(h[:, -1]) / self.temperature  # HAZARD: python-scalar


def decode_step(model, token, cache_position, enc_k, enc_v, enc_mask, finished):
    logits = model(token, cache_position, enc_k, enc_v, enc_mask)
    logger.debug("decoder step at %s", cache_position)  # HAZARD: host-code
    next_tok = logits.argmax(-1)
    eos = torch.full_like(next_tok, model.config.eos_token_id)
    return torch.where(finished, eos, next_tok)  # CLEAN: torch.where keeps the shape fixed


class Summarizer:
    def __init__(self, encoder, decoder, tokenizer, device="cuda"):
        self.encoder, self.decoder, self.tok, self.device = encoder, decoder, tokenizer, device
        self.encode = torch.compile(encoder)  # default mode: no CUDA graphs
        self.step = torch.compile(decode_step, mode="reduce-overhead")

    def _run(self, batch, bucketed):
        enc = self.tok(batch, return_tensors="pt", truncation=True, max_length=self.decoder.config.max_source_len,
                       padding="max_length" if bucketed else "longest").to(self.device)
        enc_k, enc_v = self.encode(enc["input_ids"], enc["attention_mask"])  # CLEAN: default torch.compile, ragged lengths are fine
        enc_mask = enc["attention_mask"][:, None, None, :].bool()
        bsz = enc_k.shape[0]
        token = torch.full((bsz, 1), self.decoder.config.decoder_start_token_id, device=self.device)
        finished = torch.zeros(bsz, dtype=torch.bool, device=self.device)
        out = []
        for pos in range(self.decoder.config.max_target_len):
            cache_position = torch.tensor([pos], device=self.device)  # CLEAN: built eagerly before the compiled call
            if bucketed:
                nxt = self.step(self.decoder, token, cache_position, enc_k, enc_v, enc_mask, finished)  # CLEAN: sources padded to one fixed length
                out.append(nxt.clone())  # CLEAN: cloned before the next replay
            else:
                nxt = self.step(self.decoder, token, cache_position, enc_k, enc_v, enc_mask, finished)  # HAZARD: dynamic-shape
                out.append(nxt)  # HAZARD: static-address
            finished = finished | (out[-1] == self.decoder.config.eos_token_id)
            token = out[-1].clone().unsqueeze(1)
            if finished.all().item():  # CLEAN: eager stopping check outside the compiled step
                break
        return self.tok.batch_decode(torch.stack(out, 1).tolist(), skip_special_tokens=True)

    def summarize_batch(self, articles, temperature=1.0):
        self.decoder.temperature = temperature
        return self._run(articles, bucketed=True)

    def summarize_stream(self, articles):
        return self._run(articles, bucketed=False)
