"""Blind room-impulse-response estimation for the "match this room" reverb plug-in.

An encoder reads 4 s of reverberant speech/music and a decoder synthesises a 1 s RIR
(early reflections + shaped noise tail, FiNS-style) that the convolution reverb then
uses. Encoder and decoder are graphed together with torch.cuda.make_graphed_callables.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SR, RIR_LEN, N_BANDS = 48000, 48000, 10


def octave_filterbank(n_fft=1024):
    freqs = np.linspace(0, SR / 2, n_fft // 2 + 1)
    centers = 31.25 * 2.0 ** np.arange(N_BANDS)
    return np.stack([np.exp(-0.5 * (np.log2((freqs + 1) / c)) ** 2 / 0.25) for c in centers]).astype(np.float32)


class Encoder(nn.Module):
    def __init__(self, hidden=256):
        super().__init__()
        self.octave_fb_np = octave_filterbank()
        self.register_buffer("window", torch.hann_window(1024))
        self.conv = nn.Sequential(nn.Conv1d(N_BANDS, hidden, 5, 2, 2), nn.PReLU(),
                                  nn.Conv1d(hidden, hidden, 5, 2, 2), nn.PReLU(), nn.AdaptiveAvgPool1d(1))

    def forward(self, wav):
        spec = torch.stft(wav, 1024, 256, window=self.window, return_complex=True).abs()
        fb = torch.from_numpy(self.octave_fb_np).to("cuda")  # HAZARD: pinned-memory
        bands = torch.log1p(fb @ spec)
        return self.conv(bands).squeeze(-1)


class Decoder(nn.Module):
    def __init__(self, hidden=256, seed=11):
        super().__init__()
        self.early = nn.Linear(hidden, 2400)
        self.decay = nn.Linear(hidden, N_BANDS)
        self.tail_gen = torch.Generator(device="cuda")
        self.tail_gen.manual_seed(seed)
        self.floor = 1e-4
        self.last_rt60 = 0.0

    def forward(self, z):
        t = torch.arange(RIR_LEN, device=z.device) / SR
        t60 = 0.1 + F.softplus(self.decay(z))                     # (B, bands) seconds
        env = torch.exp(-6.9 * t[None, None] / t60[..., None])
        noise = torch.randn(z.shape[0], N_BANDS, RIR_LEN, device=z.device, generator=self.tail_gen)  # HAZARD: rng
        env_active = env[env > self.floor]  # HAZARD: dynamic-shape
        self.last_rt60 = float(t60.mean())  # HAZARD: host-sync
        env = torch.where(env > self.floor, env, torch.zeros_like(env))  # CLEAN: floor applied by select, static shape
        tail = (env * noise).sum(1)
        early = F.pad(torch.tanh(self.early(z)), (0, RIR_LEN - 2400))
        return early + tail * (env_active.numel() > 0)


class RIRTrainer:
    def __init__(self, batch=16):
        self.enc, self.dec = Encoder().cuda(), Decoder().cuda()
        wav = torch.randn(batch, 4 * SR, device="cuda")
        z = torch.randn(batch, 256, device="cuda", requires_grad=True)
        self.enc_g, self.dec_g = torch.cuda.make_graphed_callables((self.enc, self.dec), ((wav,), (z,)))
        params = list(self.enc.parameters()) + list(self.dec.parameters())
        self.opt = torch.optim.Adam(params, lr=2e-4)

    def step(self, wet, rir_true):
        rir = self.dec_g(self.enc_g(wet))
        loss = multi_res_stft_loss(rir, rir_true)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()  # CLEAN: eager optimizer step, outside the graphs
        return loss.item()  # CLEAN: eager read after the graphed backward


def multi_res_stft_loss(a, b):
    loss = 0.0
    for n in (256, 1024, 4096):
        w = torch.hann_window(n, device=a.device)
        sa = torch.stft(a, n, n // 4, window=w, return_complex=True).abs()
        sb = torch.stft(b, n, n // 4, window=w, return_complex=True).abs()
        loss = loss + F.l1_loss(torch.log1p(sa), torch.log1p(sb))
    return loss
