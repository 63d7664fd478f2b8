"""Streaming RNN-T greedy decoding, one encoder chunk at a time.

The per-chunk decode (encoder chunk with cache, predictor, joint, greedy symbols)
is compiled with backend="cudagraphs" and called from the streaming session.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

BLANK = 0


class StreamingTransducer(nn.Module):
    def __init__(self, n_mels=80, d=256, vocab=1024, cache_len=64):
        super().__init__()
        self.inp = nn.Linear(n_mels, d)
        self.enc = nn.MultiheadAttention(d, 4, batch_first=True)
        self.embed = nn.Embedding(vocab, d)
        self.pred = nn.LSTMCell(d, d)
        self.joint = nn.Sequential(nn.Linear(2 * d, d), nn.Tanh(), nn.Linear(d, vocab))
        self.cache_len = cache_len

    def encode_chunk(self, feats, cache):
        x = self.inp(feats)
        ctx = torch.cat([cache, x], 1)
        y, _ = self.enc(x, ctx, ctx)
        return x + y, ctx[:, -self.cache_len:]


def greedy_chunk(model, feats, cache, h, c, last_tok, max_symbols=3):
    enc, new_cache = model.encode_chunk(feats, cache)
    cache.copy_(new_cache)  # HAZARD: static-address
    b, t_len, _ = enc.shape
    hyps = torch.full((b, t_len, max_symbols), BLANK, dtype=torch.long, device=enc.device)
    g, _ = model.pred(model.embed(last_tok), (h, c))
    for t in range(t_len):  # CLEAN: trip count is the static chunk length
        for s in range(max_symbols):
            k = model.joint(torch.cat([enc[:, t], g], -1)).argmax(-1)
            emit = k != BLANK
            hyps[:, t, s] = k
            g2, c2 = model.pred(model.embed(k), (g, c))
            g = torch.where(emit[:, None], g2, g)  # CLEAN: predictor update selected on device
            c = torch.where(emit[:, None], c2, c)
            last_tok = torch.where(emit, k, last_tok)
            if not emit.any():  # HAZARD: dynamic-control-flow
                break
    return hyps, g, c, last_tok


decode_chunk = torch.compile(greedy_chunk, backend="cudagraphs")


class StreamingSession:
    def __init__(self, model, chunk_frames=40, batch=1, d=256):
        self.model = model.eval().cuda()
        self.chunk = chunk_frames
        self.cache = torch.zeros(batch, model.cache_len, d, device="cuda")
        self.h = torch.zeros(batch, d, device="cuda")
        self.c = torch.zeros(batch, d, device="cuda")
        self.last = torch.zeros(batch, dtype=torch.long, device="cuda")
        self.tokens = []

    def _consume(self, hyps):
        self.tokens.extend(t for t in hyps.flatten().tolist() if t != BLANK)

    @torch.no_grad()
    def decode_file(self, mels):
        for chunk in mels.split(self.chunk, dim=1):
            hyps, self.h, self.c, self.last = decode_chunk(self.model, chunk, self.cache, self.h, self.c, self.last)  # HAZARD: dynamic-shape
            self._consume(hyps)
        return self.tokens

    @torch.no_grad()
    def push_live(self, chunk):
        if chunk.shape[1] < self.chunk:
            chunk = F.pad(chunk, (0, 0, 0, self.chunk - chunk.shape[1]))
        hyps, self.h, self.c, self.last = decode_chunk(self.model, chunk, self.cache, self.h, self.c, self.last)  # CLEAN: padded to the fixed chunk size
        self._consume(hyps)
        return hyps.flatten().tolist()  # CLEAN: host read-back outside the compiled function
