"""Photometric redshift PDFs for a wide-field imaging survey.

Inputs are ugrizy magnitudes, colours, errors and a few morphology features; the network
classifies into 200 redshift bins on [0, 4]. The trainer keeps a reduce-overhead compiled
model and a compiled optimizer step, and serves per-sky-tile predictions after training.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

N_IN, N_BINS = 20, 200


class PhotoZNet(nn.Module):
    def __init__(self, hidden=512, debug=False):
        super().__init__()
        self.debug = debug
        self.body = nn.Sequential(
            nn.Linear(N_IN, hidden), nn.LayerNorm(hidden), nn.GELU(),
            nn.Linear(hidden, hidden), nn.LayerNorm(hidden), nn.GELU(),
            nn.Linear(hidden, N_BINS),
        )

    def forward(self, x):
        logits = self.body(x)
        if self.debug:
            print("logit range", logits.min(), logits.max())  # HAZARD: host-code
        return logits


class PhotoZTrainer:
    def __init__(self, net, lr=2e-3, epochs=40, batch=4096):
        self.net = net.cuda()
        self.model = torch.compile(self.net, mode="reduce-overhead")
        self.flex_model = torch.compile(self.net, dynamic=True)
        self.opt = torch.optim.AdamW(self.net.parameters(), lr=lr, weight_decay=1e-4)
        self.opt_step = torch.compile(self.opt.step, mode="reduce-overhead")
        self.base_lr, self.epochs, self.batch = lr, epochs, batch
        self.z_grid = torch.linspace(0, 4, N_BINS, device="cuda")

    def fit(self, x, zbin):
        loader = DataLoader(TensorDataset(x, zbin), batch_size=self.batch, shuffle=True, drop_last=True)  # CLEAN: drop_last keeps every compiled call at one shape
        for ep in range(self.epochs):
            self.net.train()
            for xb, yb in loader:
                logits = self.model(xb.cuda(non_blocking=True))
                loss = F.cross_entropy(logits, yb.cuda(non_blocking=True), label_smoothing=0.01)
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                self.opt_step()
            for g in self.opt.param_groups:
                g["lr"] = 0.5 * self.base_lr * (1 + math.cos(math.pi * (ep + 1) / self.epochs))  # HAZARD: optimizer

    @torch.no_grad()
    def calibration_logits(self, val_x):
        self.net.eval()
        raw = []
        for chunk in val_x.split(self.batch):              # validation set is a multiple of the batch
            raw.append(self.model(chunk.cuda()))  # HAZARD: static-address
        return torch.cat(raw)

    @torch.no_grad()
    def predict_tiles(self, tiles):
        self.net.eval()
        out = {}
        for tile_id, mags in tiles.items():                 # a few hundred to 50k galaxies per tile
            pdf = self.model(mags.cuda()).softmax(-1)  # HAZARD: dynamic-shape
            out[tile_id] = (pdf * self.z_grid).sum(-1)
        return out

    @torch.no_grad()
    def predict_padded(self, mags):
        n = mags.shape[0]
        buf = torch.zeros(self.batch, N_IN, device="cuda")
        zs = []
        for start in range(0, n, self.batch):
            part = mags[start:start + self.batch].cuda()
            buf.zero_()[: part.shape[0]].copy_(part)
            zs.append(self.model(buf)[: part.shape[0]].softmax(-1).clone())  # CLEAN: padded to one shape and cloned
        return torch.cat(zs)

    @torch.no_grad()
    def predict_catalog(self, mags):
        return self.flex_model(mags.cuda()).softmax(-1)  # CLEAN: default compile, no CUDA graphs


if __name__ == "__main__":
    x = torch.randn(400_000, N_IN)
    y = torch.randint(0, N_BINS, (400_000,))
    trainer = PhotoZTrainer(PhotoZNet(debug=True), epochs=3)
    trainer.fit(x, y)
    cal = trainer.calibration_logits(torch.randn(8 * 4096, N_IN))
    tiles = {t: torch.randn(int(300 + 997 * t), N_IN) for t in range(12)}
    zphot = trainer.predict_tiles(tiles)
    print({t: float(z.median()) for t, z in list(zphot.items())[:3]})
