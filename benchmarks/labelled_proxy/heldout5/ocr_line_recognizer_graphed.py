"""Printed text-line recognizer: CNN backbone + BiLSTM head with per-column character targets.

Backbone and head are graphed with torch.cuda.make_graphed_callables; loss and optimizer stay eager.
"""
import random
import torch
import torch.nn as nn
import torch.nn.functional as F

ALPHABET = " abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:'-"


class ConvBackbone(nn.Module):
    def __init__(self, ch=64):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, ch, 3, padding=1), nn.BatchNorm2d(ch), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(ch, 2 * ch, 3, padding=1), nn.BatchNorm2d(2 * ch), nn.ReLU(), nn.MaxPool2d((2, 1)),
            nn.Conv2d(2 * ch, 4 * ch, 3, padding=1), nn.BatchNorm2d(4 * ch), nn.ReLU(),
        )
        self.drop = nn.Dropout2d(0.1)

    def forward(self, img):  # (B, 1, 32, W)
        f = self.drop(self.net(img))  # CLEAN: dropout draws from the default CUDA generator
        return f.mean(dim=2).transpose(1, 2).contiguous()  # (B, W/2, C)


class SeqHead(nn.Module):
    def __init__(self, c_in, hidden, n_cls, col_drop=0.05):
        super().__init__()
        self.rnn = nn.LSTM(c_in, hidden, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(2 * hidden, n_cls)
        self.col_drop = col_drop

    def forward(self, feats, col_mask):
        if self.training and random.random() < self.col_drop:  # HAZARD: host-code
            feats = feats * (torch.rand_like(feats[..., :1]) > 0.1)
        width = int(col_mask.sum(dim=1).max())  # HAZARD: host-sync
        out, _ = self.rnn(feats[:, :width])
        logits = self.fc(out)
        return F.pad(logits, (0, 0, 0, feats.shape[1] - width))


def build(device="cuda", batch=32, height=32, width=512):
    backbone = ConvBackbone().to(device)
    head = SeqHead(256, 256, len(ALPHABET) + 1).to(device)
    act_stats = {}

    def record(mod, inp, out):
        act_stats["backbone_abs_mean"] = out.detach().abs().mean()

    backbone.register_forward_hook(record)  # HAZARD: api-misuse
    img = torch.randn(batch, 1, height, width, device=device)
    cols = width // 2
    feats = torch.randn(batch, cols, 256, device=device, requires_grad=True)
    mask = torch.ones(batch, cols, device=device)
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        backbone, head = torch.cuda.make_graphed_callables((backbone, head), ((img,), (feats, mask)))
    return backbone, head, act_stats


def train(loader, epochs=10):
    backbone, head, stats = build()
    params = list(backbone.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=3e-4, weight_decay=1e-2)
    for epoch in range(epochs):
        for step, (img, target, mask) in enumerate(loader):
            img = img.cuda(non_blocking=True)
            target, mask = target.cuda(non_blocking=True), mask.cuda(non_blocking=True)
            with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # CLEAN: autocast without the weight cache around graphed calls
                logits = head(backbone(img), mask)
            loss = F.cross_entropy(logits.flatten(0, 1).float(), target.flatten(), ignore_index=-100)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(params, 5.0)
            opt.step()
            if step % 50 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")  # CLEAN: .item() outside the graphed callables


def decode(logits):
    ids = logits.argmax(-1).tolist()
    out = []
    for row in ids:
        chars, prev = [], None
        for i in row:
            if i != prev and 0 < i <= len(ALPHABET):
                chars.append(ALPHABET[i - 1])
            prev = i
        out.append("".join(chars).strip())
    return out
