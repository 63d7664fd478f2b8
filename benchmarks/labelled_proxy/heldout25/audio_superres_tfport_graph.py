"""Audio super-resolution (bandwidth extension 4 kHz -> 16 kHz), ported from the TF1
AudioUNet code (kuleshov/audio-super-res). The TF version ran `sess.run(train_op)` in a
loop; here the whole train step is one CUDA graph. `history` mimics the Keras History.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def subpixel1d(x, r):
    n, c, t = x.shape
    return x.view(n, c // r, r, t).permute(0, 1, 3, 2).reshape(n, c // r, t * r)


class AudioUNet(nn.Module):
    def __init__(self, depth=4, base=32):
        super().__init__()
        chans = [min(base * 2 ** i, 256) for i in range(depth)]
        self.down = nn.ModuleList()
        c_in = 1
        for c in chans:
            self.down.append(nn.Conv1d(c_in, c, 9, stride=2, padding=4))
            c_in = c
        self.up = nn.ModuleList(nn.Conv1d(c_in if i == 0 else 2 * chans[-i], 2 * chans[-i - 1] * 2, 9, padding=4)
                                for i in range(depth))
        self.final = nn.Conv1d(2 * chans[0], 2, 9, padding=4)

    def forward(self, x):
        skips, h = [], x
        for conv in self.down:
            h = F.leaky_relu(conv(h), 0.2)
            skips.append(h)
        for conv, skip in zip(self.up, reversed(skips)):
            h = subpixel1d(F.relu(conv(h)), 2)[..., :skip.shape[-1] * 2]
            h = torch.cat([h[..., ::2], skip], 1)
        return x + subpixel1d(self.final(h), 2)[..., :x.shape[-1]]


class GraphedTrainer:
    def __init__(self, model, batch=16, length=8192, lr=3e-4):
        self.model = model.cuda()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=lr, betas=(0.9, 0.999), capturable=True)  # CLEAN: capturable Adam, step state on the GPU
        self.static_lr_audio = torch.zeros(batch, 1, length, device="cuda")
        self.static_hr = torch.zeros(batch, 1, length, device="cuda")
        self.metric_stream = torch.cuda.Stream()
        self.history = {"loss": [], "snr": []}

    def _train_step(self):
        self.opt.zero_grad(set_to_none=False)
        pred = self.model(self.static_lr_audio)
        loss = F.mse_loss(pred, self.static_hr)
        loss.backward()
        self.opt.step()
        with torch.cuda.stream(self.metric_stream):  # HAZARD: stream
            noise = (pred.detach() - self.static_hr).pow(2).mean()
            snr = 10 * torch.log10(self.static_hr.pow(2).mean() / noise)
        self.history["loss"].append(loss.item())  # HAZARD: host-sync
        return loss.detach(), snr

    def build(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._train_step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_loss, self.static_snr = self._train_step()

    def fit(self, loader, epochs=20, base_lr=3e-4):
        self.build()
        for epoch in range(epochs):
            lr = base_lr * 0.5 * (1 + math.cos(math.pi * epoch / epochs))
            for g in self.opt.param_groups:
                g["lr"] = lr  # HAZARD: optimizer
            for lr_audio, hr_audio in loader:
                self.static_lr_audio = lr_audio.cuda(non_blocking=True)  # HAZARD: static-address
                self.static_hr.copy_(hr_audio, non_blocking=True)  # CLEAN: in-place copy into the static target
                self.graph.replay()
            self.history["snr"].append(self.static_snr.item())  # CLEAN: scalar read after replay, eager
            print(f"epoch {epoch}: loss {self.static_loss.item():.5f}")  # CLEAN: eager print outside the graph
