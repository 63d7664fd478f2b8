"""Learned receive beamforming for single plane-wave ultrasound.

RF channel data of a 128-element linear probe are delayed (fixed geometry),
weighted by a small apodisation network and envelope-detected; the target is
the 75-angle coherently compounded image. Delay, apodisation and envelope stages
are graphed together with torch.cuda.make_graphed_callables in one pool.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

B, C, T, NZ, NX = 4, 128, 2048, 256, 128


class DelayStage(nn.Module):
    def __init__(self, delay_idx, clip=0.95):
        super().__init__()
        self.register_buffer("delay_idx", delay_idx)              # [C, NZ*NX] sample indices
        self.register_buffer("dead", torch.zeros(C, dtype=torch.bool))
        self.tgc = nn.Parameter(torch.ones(1, 1, T))               # learned time-gain compensation
        self.clip = clip

    def forward(self, rf):
        if rf.abs().amax() > self.clip:  # HAZARD: dynamic-control-flow
            rf = rf.clamp(-self.clip, self.clip)
        rf = rf.masked_fill(self.dead.view(1, C, 1), 0.0) * self.tgc  # CLEAN: fixed-shape masking of dead elements
        idx = self.delay_idx.unsqueeze(0).expand(rf.shape[0], -1, -1)
        return rf.gather(2, idx).view(rf.shape[0], C, NZ, NX)  # CLEAN: gather with a CUDA index buffer


class ApodNet(nn.Module):
    def __init__(self, ch=32):
        super().__init__()
        self.register_buffer("dead", torch.zeros(C, dtype=torch.bool))
        self.hann_np = np.hanning(C).astype(np.float32)            # receive window, edited by the f-number tool
        self.net = nn.Sequential(nn.Conv2d(C, ch, 3, padding=1), nn.ReLU(), nn.Conv2d(ch, C, 3, padding=1))

    def forward(self, focused):
        live = torch.nonzero(~self.dead).flatten()  # HAZARD: dynamic-shape
        scale = focused.index_select(1, live).abs().mean().clamp_min(1e-6)
        w = torch.sigmoid(self.net(focused / scale))
        apod = torch.from_numpy(self.hann_np).cuda()  # HAZARD: pinned-memory
        return (focused * w * apod.view(1, C, 1, 1)).sum(1)


class EnvelopeStage(nn.Module):
    def __init__(self):
        super().__init__()
        self.gain = nn.Parameter(torch.tensor(1.0))

    def forward(self, iq):
        spec = torch.fft.fft(iq, dim=1)
        spec[:, NZ // 2:] = 0                                      # analytic signal along depth
        env = torch.fft.ifft(2 * spec, dim=1).abs()
        return 20 * torch.log10(self.gain * env + 1e-6)


def build(delay_idx):
    delay, apod, env = DelayStage(delay_idx).cuda(), ApodNet().cuda(), EnvelopeStage().cuda()
    grad_norms = []
    apod.register_full_backward_hook(lambda m, gi, go: grad_norms.append(go[0].norm()))  # HAZARD: api-misuse
    rf0 = torch.randn(B, C, T, device="cuda") * 0.1
    foc0 = torch.randn(B, C, NZ, NX, device="cuda", requires_grad=True)
    iq0 = torch.randn(B, NZ, NX, device="cuda", requires_grad=True)
    pool = torch.cuda.graph_pool_handle()
    delay_g, apod_g, env_g = torch.cuda.make_graphed_callables(
        (delay, apod, env), ((rf0,), (foc0,), (iq0,)), num_warmup_iters=3, pool=pool)
    return delay_g, apod_g, env_g


def train(loader, delay_idx, epochs=30):
    delay_g, apod_g, env_g = build(delay_idx)
    opt = torch.optim.Adam([p for m in (delay_g, apod_g, env_g) for p in m.parameters()], lr=3e-4)
    for epoch in range(epochs):
        for rf, target_db in loader:
            img = env_g(apod_g(delay_g(rf.cuda(non_blocking=True))))
            loss = F.l1_loss(img.clamp(-60, 0), target_db.cuda(non_blocking=True).clamp(-60, 0))
            loss.backward()
            opt.step()
            opt.zero_grad()
        print(epoch, loss.item())  # CLEAN: host read outside the graphed callables
