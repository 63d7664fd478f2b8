"""Binaural hearing-aid pipeline: neural MVDR-style beamformer + compressor, captured once, steered between replays."""
import torch
import torch.nn as nn

class Meter:
    def __init__(self):
        self.history = []
    def record(self, x):
        self.history.append(x.pow(2).mean().cpu())  # HAZARD: host-sync

class SilentMeter(Meter):
    def record(self, x):
        pass  # CLEAN: no-op meter override

class Compressor:
    def __init__(self, ratio=3.0, makeup_db=6.0):
        self.ratio = ratio
        self.makeup_db = makeup_db
        self.threshold = torch.full((), 0.1, device="cuda")
    def __call__(self, x):
        env = x.abs().amax(-1, keepdim=True)
        over = torch.clamp(env / self.threshold, min=1.0)
        gain = over ** (1.0 / 3.0 - 1.0)  # CLEAN: fixed ratio written as a literal
        makeup = 10.0 ** (self.makeup_db / 20.0)  # HAZARD: python-scalar
        return x * gain * makeup

class FeedbackCanceller:
    def __init__(self):
        self.stream = torch.cuda.Stream()
    def __call__(self, x, est):
        with torch.cuda.stream(self.stream):  # HAZARD: stream
            y = x - 0.1 * est
        return y

class Beamformer(nn.Module):
    def __init__(self, mics=4, bins=129):
        super().__init__()
        self.mask = nn.Sequential(nn.Linear(mics * bins, 256), nn.ReLU(), nn.Linear(256, bins), nn.Sigmoid())
    def forward(self, spec, steer):
        mag = spec.abs().flatten(1, 2).transpose(1, 2)
        m = self.mask(mag).transpose(1, 2)
        return (spec * steer.conj().unsqueeze(-1)).sum(1) * m

class HearingAid:
    def __init__(self, bf, comp, fbc, meter, frames=16, mics=4, bins=129):
        self.bf, self.comp, self.fbc, self.meter = bf.cuda().eval(), comp, fbc, meter
        self.spec = torch.zeros(1, mics, bins, frames, dtype=torch.complex64, device="cuda")
        self.steer = torch.ones(1, mics, bins, dtype=torch.complex64, device="cuda")
        self.echo = torch.zeros(1, bins, frames, device="cuda")
    def _process(self):
        y = self.bf(self.spec, self.steer).abs()
        y = self.fbc(y, self.echo)
        out = self.comp(y)
        self.meter.record(out)
        return out
    @torch.no_grad()
    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._process()
        torch.cuda.current_stream().wait_stream(side)
        self.g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.g):  # CLEAN: warmed on a forked side stream
            self.out = self._process()
    def hop(self, spec, echo):
        self.spec.copy_(spec)  # CLEAN: copy_ into the captured spectrum
        self.echo.copy_(echo)
        self.g.replay()
        return self.out.clone()
    def steer_to(self, azimuth_vec):
        self.steer = azimuth_vec.to(torch.complex64).cuda()  # HAZARD: static-address
    def set_threshold(self, t):
        self.comp.threshold.fill_(t)  # CLEAN: in-place update of a captured tensor
    def set_volume(self, db):
        self.comp.makeup_db = db

def run_day(frames_stream, events, fitting="quiet"):
    meter = Meter() if fitting == "audiologist" else SilentMeter()
    aid = HearingAid(Beamformer(), Compressor(), FeedbackCanceller(), meter)
    aid.capture()
    out = []
    for i, (spec, echo) in enumerate(frames_stream):
        if i in events:
            kind, value = events[i]
            {"steer": aid.steer_to, "volume": aid.set_volume, "threshold": aid.set_threshold}[kind](value)
        out.append(aid.hop(spec.cuda(), echo.cuda()))
    return out
