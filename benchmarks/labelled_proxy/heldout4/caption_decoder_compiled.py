"""Image captioning service: ViT-style patch encoder + transformer caption decoder.

Both halves are compiled with CUDA graphs at start-up.  The service also returns
a pooled image vector that feeds the photo search index.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("captioner")


class CaptionDecoder(nn.Module):
    def __init__(self, vocab=16000, dim=512, depth=6, heads=8, pad_id=0, max_len=32):
        super().__init__()
        self.pad_id = pad_id
        self.tok = nn.Embedding(vocab, dim, padding_idx=pad_id)
        self.pos = nn.Parameter(torch.zeros(1, max_len, dim))
        layer = nn.TransformerDecoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True)
        self.body = nn.TransformerDecoder(layer, depth)
        self.out = nn.Linear(dim, vocab)
        self.last_longest = 0

    def forward(self, tokens, memory):
        L = tokens.shape[1]
        pad = tokens == self.pad_id
        lengths = (~pad).sum(1).tolist()  # HAZARD: host-sync
        self.last_longest = max(lengths)
        log.debug("decoding %d captions, prefix %d", tokens.shape[0], L)  # HAZARD: host-code
        causal = torch.triu(torch.ones(L, L, dtype=torch.bool, device=tokens.device), 1)
        h = self.tok(tokens) + self.pos[:, :L]
        return self.out(self.body(h, memory, tgt_mask=causal, tgt_key_padding_mask=pad))[:, -1]


class Captioner:
    def __init__(self, encoder: nn.Module, decoder: CaptionDecoder, bos_id=1, eos_id=2, max_len=32):
        self.encoder = encoder.cuda().eval()
        self.decoder = decoder.cuda().eval()
        self.bos_id, self.eos_id, self.max_len = bos_id, eos_id, max_len
        self.encode = torch.compile(self.encoder, mode="reduce-overhead")
        self.decoder.forward = torch.compile(self.decoder.forward, mode="max-autotune")

    @torch.no_grad()
    def caption(self, images):
        B = images.shape[0]
        memory = self.encode(images).clone()  # CLEAN: cloned before any other compiled function runs
        buf = torch.full((B, self.max_len), self.decoder.pad_id, dtype=torch.long, device="cuda")
        buf[:, 0] = self.bos_id
        done = torch.zeros(B, dtype=torch.bool, device="cuda")
        for t in range(1, self.max_len):
            logits = self.decoder(buf[:, :t], memory)  # HAZARD: dynamic-shape
            nxt = logits.argmax(-1).masked_fill(done, self.decoder.pad_id)  # CLEAN: finished rows padded elementwise, no branch
            buf[:, t] = nxt
            done |= nxt == self.eos_id
        return buf

    @torch.no_grad()
    def first_word_and_vector(self, images):
        memory = self.encode(images)
        bos = torch.full((images.shape[0], 1), self.bos_id, dtype=torch.long, device="cuda")
        first = self.decoder(bos, memory).argmax(-1)
        img_vec = F.normalize(memory.mean(1), dim=-1)  # HAZARD: static-address
        return first, img_vec


def serve_batch(captioner: Captioner, images, vocab):
    ids = captioner.caption(images.cuda(non_blocking=True))
    rows = ids.cpu().tolist()  # CLEAN: host read after decoding, outside compiled code
    out = []
    for row in rows:
        words = [vocab[i] for i in row[1:] if i not in (captioner.eos_id, captioner.decoder.pad_id)]
        out.append(" ".join(words))
    return out
