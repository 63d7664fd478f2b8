"""Encoder-decoder translation with a static self-attention KV cache.

The encoder is compiled with the default mode; the one-token decoder step is
compiled with mode="reduce-overhead" and kept on the Translator object.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("nmt.decode")


class CachedDecoderLayer(nn.Module):
    def __init__(self, d, heads, max_tgt, batch):
        super().__init__()
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.cross_q, self.cross_kv, self.cross_out = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.ReLU(), nn.Linear(4 * d, d))
        self.heads = heads
        self.register_buffer("k_cache", torch.zeros(batch, heads, max_tgt, d // heads))
        self.register_buffer("v_cache", torch.zeros(batch, heads, max_tgt, d // heads))

    def forward(self, h, pos, memory, mem_pad):
        b, t, d = h.shape
        q, k, v = self.qkv(h).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        self.k_cache.index_copy_(2, pos, k)  # CLEAN: in-place write to a registered buffer (a static input) is supported
        self.v_cache.index_copy_(2, pos, v)
        causal = torch.arange(self.k_cache.shape[2], device=h.device) <= pos
        a = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=causal)
        h = h + self.out(a.transpose(1, 2).reshape(b, t, d))
        cq = self.cross_q(h).view(b, t, self.heads, -1).transpose(1, 2)
        ck, cv = self.cross_kv(memory).view(b, -1, 2, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        ca = F.scaled_dot_product_attention(cq, ck, cv, attn_mask=~mem_pad[:, None, None, :])
        h = h + self.cross_out(ca.transpose(1, 2).reshape(b, t, d))
        return h + self.ff(h)


class Seq2Seq(nn.Module):
    def __init__(self, vocab, d=512, heads=8, layers=6, max_tgt=256, batch=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        enc_layer = nn.TransformerEncoderLayer(d, heads, batch_first=True)
        self.encoder = nn.TransformerEncoder(enc_layer, layers)
        self.dec_layers = nn.ModuleList(CachedDecoderLayer(d, heads, max_tgt, batch) for _ in range(layers))
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.temperature = 1.0

    def encode(self, src, src_pad):
        n_real = int((~src_pad).sum(-1).max().item())  # CLEAN: encode is compiled with the default mode, no CUDA graphs
        src, src_pad = src[:, :n_real], src_pad[:, :n_real]
        return self.encoder(self.embed(src), src_key_padding_mask=src_pad), src_pad

    def decode_step(self, tok, pos, memory, mem_pad):
        log.debug("decode step")  # HAZARD: host-code
        h = self.embed(tok)
        for layer in self.dec_layers:
            h = layer(h, pos, memory, mem_pad)
        logits = self.lm_head(h[:, -1]).float()
        return logits / self.temperature  # HAZARD: python-scalar


class Translator:
    def __init__(self, model, bos, eos, max_tgt=256):
        self.model = model.eval().cuda()
        self.bos, self.eos, self.max_tgt = bos, eos, max_tgt
        self.encode = torch.compile(model.encode)
        self.step = torch.compile(model.decode_step, mode="reduce-overhead")
        self.step_logits = []

    @torch.inference_mode()
    def translate(self, src, src_pad, temperature=1.0):
        self.model.temperature = temperature
        memory, mem_pad = self.encode(src, src_pad)
        b = src.shape[0]
        tok = torch.full((b, 1), self.bos, dtype=torch.long, device="cuda")
        pos = torch.zeros(1, dtype=torch.long, device="cuda")
        finished = torch.zeros(b, dtype=torch.bool, device="cuda")
        out = []
        for i in range(self.max_tgt - 1):
            pos.fill_(i)
            logits = self.step(tok, pos, memory, mem_pad)  # HAZARD: dynamic-shape
            self.step_logits.append(logits)  # HAZARD: static-address
            nxt = torch.where(finished, self.eos, logits.argmax(-1))
            out.append(nxt.clone())  # CLEAN: cloned before the next replay overwrites it
            finished |= nxt == self.eos
            tok = nxt[:, None]
            if bool(finished.all()):  # CLEAN: eager stopping check between compiled calls
                break
        return torch.stack(out, 1)
