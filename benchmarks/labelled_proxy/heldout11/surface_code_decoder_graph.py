"""Real-time neural decoder for a distance-d rotated surface code (memory experiment).

Syndrome volumes (rounds x (d+1) x (d+1) stabilizer grid) stream in from the control stack;
a 3D CNN predicts the logical flip. The whole decode step is captured with
capture_begin/capture_end on the decoder's own stream and replayed every QEC cycle batch.
"""
import logging
import math

import torch
import torch.nn as nn

log = logging.getLogger("qec.decoder")


class SyndromeCNN(nn.Module):
    def __init__(self, rounds, d, ch=64):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv3d(2, ch, 3, padding=1), nn.GELU(),
            nn.Conv3d(ch, ch, 3, padding=1), nn.GELU(),
            nn.Conv3d(ch, ch, 3, padding=1), nn.GELU())
        self.head = nn.Linear(ch, 1)

    def forward(self, syn, soft):
        x = torch.stack([syn, soft], 1)                      # (B, 2, R, d+1, d+1)
        return self.head(self.body(x).mean((2, 3, 4))).squeeze(-1)


class NoiseModel:
    def __init__(self, p_meas=2e-3, p_leak=1e-4):
        self.p_meas, self.p_leak = p_meas, p_leak

    def recalibrate(self, p_meas):
        self.p_meas = p_meas                                 # from the nightly randomized benchmarking run


class RealtimeDecoder:
    def __init__(self, net, noise, batch=64, rounds=25, d=5):
        self.net = net.cuda().eval()
        self.noise = noise
        self.syn = torch.zeros(batch, rounds, d + 1, d + 1, device="cuda")
        self.frame = torch.zeros(batch, device="cuda")
        self.frame_out = torch.zeros(batch, device="cuda")
        self.side = torch.cuda.Stream()
        self.soft_gen = torch.Generator(device="cuda").manual_seed(11)
        self.leak_gen = torch.Generator(device="cuda").manual_seed(12)
        self.graph = torch.cuda.CUDAGraph()

    @torch.no_grad()
    def _decode(self):
        p = self.noise.p_meas  # HAZARD: python-scalar
        llr = math.log((1 - p) / p)
        soft = llr * (1 + 0.05 * torch.rand(self.syn.shape, device="cuda", generator=self.soft_gen))  # CLEAN: generator registered with the graph before capture
        leaked = torch.rand(self.syn.shape, device="cuda", generator=self.leak_gen) < self.noise.p_leak  # HAZARD: rng
        erasures = torch.bernoulli(torch.full_like(self.syn, 1e-4))  # CLEAN: default CUDA generator is graph-safe
        syn = torch.where(leaked | erasures.bool(), 0.5, self.syn)
        logical = (self.net(syn, soft) > 0).float()
        self.frame.copy_((self.frame + logical) % 2)
        log.debug(f"cycle batch logical flip rate {logical.mean()}")  # HAZARD: host-sync
        flips = logical.tolist()  # HAZARD: host-sync
        with torch.cuda.stream(torch.cuda.default_stream()):  # HAZARD: stream
            self.frame_out.copy_(self.frame)                 # the FPGA bridge polls the default stream
        return flips

    def capture(self):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(3):
                self._decode()
            self.graph.register_generator_state(self.soft_gen)
            self.graph.capture_begin()  # CLEAN: capture begins on the decoder's side stream, not the default stream
            self.flips = self._decode()
            self.graph.capture_end()
        torch.cuda.current_stream().wait_stream(self.side)

    def cycle(self, syndromes):
        self.syn.copy_(syndromes)
        self.graph.replay()
        return self.frame_out


if __name__ == "__main__":
    noise = NoiseModel()
    dec = RealtimeDecoder(SyndromeCNN(rounds=25, d=5), noise)
    dec.capture()
    for i in range(1000):
        out = dec.cycle(torch.randint(0, 2, (64, 25, 6, 6), device="cuda").float())
        if i == 500:
            noise.recalibrate(3.1e-3)
