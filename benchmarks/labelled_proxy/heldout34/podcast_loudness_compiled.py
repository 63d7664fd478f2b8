"""Podcast mastering: loudness-normalising enhancer built from closure factories, compiled with reduce-overhead."""
import torch
import torch.nn as nn
import torch.nn.functional as F

def make_limiter(ceiling_db):
    ceiling = 10.0 ** (ceiling_db / 20.0)
    def limit(x):
        return torch.tanh(x / ceiling) * ceiling  # CLEAN: ceiling fixed when the closure is built
    return limit

def make_target(settings):
    def gain_for(rms):
        target = settings["target_lufs"]  # HAZARD: python-scalar
        return 10.0 ** ((target + 23.0) / 20.0) / rms.clamp_min(1e-4)
    return gain_for

def make_reporter(verbose):
    def report(tag, x):
        if verbose:
            print(tag, x.abs().amax(-1))  # HAZARD: host-code
        return x
    return report

class Denoiser(nn.Module):
    def __init__(self, ch=48):
        super().__init__()
        self.enc = nn.Conv1d(1, ch, 32, 16, padding=8)
        self.mid = nn.Conv1d(ch, ch, 3, padding=1)
        self.dec = nn.ConvTranspose1d(ch, 1, 32, 16, padding=8)
    def forward(self, x):
        return x + self.dec(F.gelu(self.mid(F.gelu(self.enc(x)))))

class Master(nn.Module):
    def __init__(self, settings, verbose):
        super().__init__()
        self.denoise = Denoiser()
        self.stages = [make_reporter(verbose), ]
        self.gain_for = make_target(settings)
        self.limit = make_limiter(-1.0)
    def forward(self, x):
        y = self.denoise(x)
        for stage in self.stages:
            y = stage("denoised", y)
        rms = y.pow(2).mean(-1, keepdim=True).sqrt()  # CLEAN: device-side loudness, no host read
        return self._gate(self.limit(y * self.gain_for(rms)), rms)
    @staticmethod
    def _gate(y, rms):
        if rms.max() < 1e-4:  # HAZARD: dynamic-control-flow
            return torch.zeros_like(y)
        return y

class Episode:
    CHUNK = 48000 * 10
    def __init__(self, master):
        self.master = master.cuda().eval()
        self.run = torch.compile(self.master, mode="reduce-overhead")
    def chunks(self, wav):
        for s in range(0, wav.shape[-1], self.CHUNK):
            yield wav[..., s:s + self.CHUNK]
    @torch.no_grad()
    def master_padded(self, wav):
        out = []
        for c in self.chunks(wav):
            c = F.pad(c, (0, self.CHUNK - c.shape[-1]))
            out.append(self.run(c).clone())  # CLEAN: fixed chunk length, output cloned
        return torch.cat(out, -1)[..., : wav.shape[-1]]
    @torch.no_grad()
    def master_streaming(self, wav):
        out = []
        for c in self.chunks(wav):
            out.append(self.run(c))  # HAZARD: static-address
        return torch.cat(out, -1)
    @torch.no_grad()
    def master_segments(self, segments):
        return [self.run(s).clone() for s in segments]  # HAZARD: dynamic-shape

class Show:
    def __init__(self, verbose=True):
        self.settings = {"target_lufs": -16.0}
        self.episode = Episode(Master(self.settings, verbose))
    def publish(self, wav, platform):
        self.settings["target_lufs"] = {"spotify": -14.0, "apple": -16.0}.get(platform, -16.0)
        return self.episode.master_padded(wav.cuda())
