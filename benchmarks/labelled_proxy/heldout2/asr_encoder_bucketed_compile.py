"""ASR encoder training under reduce-overhead; train batches are bucketed, eval batches are not."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BUCKETS = (400, 800, 1200, 1600, 2000)


def pad_to_bucket(feats, lens):
    T = feats.shape[1]
    target = next((b for b in BUCKETS if b >= T), BUCKETS[-1])
    return F.pad(feats[:, :target], (0, 0, 0, target - min(T, target))), lens.clamp(max=target)


class ConvSubsample(nn.Module):
    def __init__(self, n_mels=80, dim=256):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, dim, 3, 2), nn.ReLU(), nn.Conv2d(dim, dim, 3, 2), nn.ReLU())
        self.out = nn.Linear(dim * (((n_mels - 1) // 2 - 1) // 2), dim)

    def forward(self, x):
        h = self.conv(x.unsqueeze(1))
        b, c, t, f = h.shape
        return self.out(h.transpose(1, 2).reshape(b, t, c * f))


class Block(nn.Module):
    def __init__(self, dim, heads=4):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.o = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.SiLU(), nn.Linear(4 * dim, dim))

    def forward(self, h, pad):
        b, t, d = h.shape
        q, k, v = self.qkv(self.n1(h)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=~pad[:, None, None, :])
        h = h + self.o(att.transpose(1, 2).reshape(b, t, d))
        return h + self.ff(self.n2(h))


class Encoder(nn.Module):
    def __init__(self, dim=256, layers=12, vocab=512, spec_p=0.05):
        super().__init__()
        self.sub = ConvSubsample(dim=dim)
        self.blocks = nn.ModuleList(Block(dim) for _ in range(layers))
        self.ctc = nn.Linear(dim, vocab)
        self.spec_p = spec_p

    def forward(self, feats, lens):
        if self.training:
            t_mask = torch.rand(feats.shape[:2], device=feats.device) < self.spec_p  # CLEAN: SpecAugment mask drawn on the device
            feats = feats.masked_fill(t_mask[..., None], 0.0)
        h = self.sub(feats)
        out_lens = ((lens - 1) // 2 - 1) // 2
        pad = torch.arange(h.shape[1], device=h.device)[None] >= out_lens[:, None]
        max_len = int(out_lens.max())  # HAZARD: host-sync
        h, pad = h[:, :max_len], pad[:, :max_len]
        for blk in self.blocks:
            h = blk(h, pad)
        return self.ctc(h).log_softmax(-1), out_lens


def train_epoch(enc, loader, opt):
    enc.train()
    step = torch.compile(enc, mode="reduce-overhead")
    for feats, lens, targets, tgt_lens in loader:
        feats, lens = pad_to_bucket(feats.cuda(), lens.cuda())  # CLEAN: inputs padded to a few fixed bucket lengths
        logp, out_lens = step(feats, lens)
        loss = F.ctc_loss(logp.transpose(0, 1), targets.cuda(), out_lens, tgt_lens.cuda(), zero_infinity=True)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


@torch.no_grad()
def evaluate(enc, loader):
    enc.eval()
    fwd = torch.compile(enc, mode="reduce-overhead")
    total_err = 0
    for feats, lens, refs in loader:
        logp, out_lens = fwd(feats.cuda(), lens.cuda())  # HAZARD: dynamic-shape
        hyp = logp.argmax(-1).cpu()  # CLEAN: host read outside the compiled module
        total_err += sum(int((h[:l] != r[:l]).sum()) for h, r, l in zip(hyp, refs, out_lens.tolist()))
    return total_err
