"""Packed-sequence encoder; only the module's forward is compiled with reduce-overhead."""
import torch
import torch.nn as nn


class PackedEncoder(nn.Module):
    def __init__(self, vocab=30522, dim=384, max_segments=16, layout="bshd"):
        super().__init__()
        self.layout = layout
        self.max_segments = max_segments
        self.emb = nn.Embedding(vocab, dim)
        self.seg_emb = nn.Embedding(max_segments, dim)
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(dim, 6, batch_first=True), 4)

    def forward(self, tokens, seg_lens, pad_mask):
        b, t = tokens.shape
        seg_ids = torch.arange(self.max_segments, device=tokens.device)
        seg_ids = seg_ids.repeat_interleave(seg_lens)  # HAZARD: dynamic-shape
        seg_range = torch.arange(self.max_segments, device=tokens.device)
        fixed_ids = seg_range.repeat_interleave(seg_lens, output_size=t)  # CLEAN: output_size gives a static result length
        h = self.emb(tokens) + self.seg_emb(fixed_ids)[None]
        if self.layout == "thd":  # CLEAN: string setting, not a tensor
            h = h.flatten(0, 1)[None]
        h = self.enc(h, src_key_padding_mask=pad_mask)
        pad_positions = pad_mask.nonzero()  # HAZARD: dynamic-shape
        n_real = int(pad_mask.logical_not().sum())  # HAZARD: host-sync
        return h * (t / max(n_real, 1)), pad_positions, seg_ids


def build(device="cuda"):
    model = PackedEncoder().to(device).eval()
    model.forward = torch.compile(model.forward, mode="reduce-overhead")
    return model


@torch.no_grad()
def embed_corpus(model, batches):
    outs = []
    for tokens, seg_lens, pad_mask in batches:
        h, _, _ = model(tokens.cuda(), seg_lens.cuda(), pad_mask.cuda())
        outs.append(h.mean(1).clone())  # CLEAN: cloned before the next cudagraph replay
    return torch.cat(outs)
