"""Provenance check for an image-generation product: decode the 48-bit invisible watermark.

Customer-reported images are checked in batches. The decoder runs behind a simulated
JPEG/noise attack (the same augmentation it was trained with) so scores are calibrated.
"""
import logging
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("provenance")
N_BITS = 48
JPEG_Q = (50, 70, 90)


class WatermarkDecoder(nn.Module):
    def __init__(self, c=64):
        super().__init__()
        layers, cin = [], 3
        for _ in range(6):
            layers += [nn.Conv2d(cin, c, 3, padding=1), nn.BatchNorm2d(c), nn.GELU()]
            cin = c
        self.body = nn.Sequential(*layers)
        self.to_bits = nn.Conv2d(c, N_BITS, 1)

    def forward(self, x):
        return self.to_bits(self.body(x)).mean((2, 3))


class ProvenanceChecker:
    def __init__(self, dec, sizes=((256, 256), (512, 512)), batch=32, device="cuda"):
        self.dec = dec.eval().to(device)
        self.batch = batch
        self.key_gen = torch.Generator(device=device)
        self.key_gen.manual_seed(0xC0FFEE)
        self.bit_hist = torch.zeros(N_BITS, device=device)
        self.last_payload = []
        self.g = torch.cuda.CUDAGraph()
        self.side = torch.cuda.Stream()
        self.io = {}
        for hw in sizes:
            self._capture(hw)

    def _attack_sim(self, x):
        q = random.choice(JPEG_Q)  # HAZARD: host-code
        blur = 0.5 + (100 - q) / 100.0
        x = F.avg_pool2d(x, 3, 1, 1) * (blur - 0.5) + x * (1.5 - blur)
        with torch.random.fork_rng(devices=[x.device]):  # CLEAN: fork_rng restores the same state inside a capture
            x = x + 0.01 * torch.randn_like(x)
        return x + 0.005 * torch.randn(x.shape, generator=self.key_gen, device=x.device)  # HAZARD: rng

    def _decode(self, x):
        logits = self.dec(self._attack_sim(x))
        bits = (logits > 0).float()  # CLEAN: thresholded on the device
        self.last_payload = bits[0].int().tolist()  # HAZARD: host-sync
        with torch.cuda.stream(torch.cuda.default_stream()):  # HAZARD: stream
            self.bit_hist.add_(bits.sum(0))
        return logits, bits

    @torch.no_grad()
    def _capture(self, hw):
        x = torch.zeros(self.batch, 3, *hw, device="cuda")
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(3):
                self._decode(x)
        torch.cuda.current_stream().wait_stream(self.side)
        with torch.cuda.graph(self.g, stream=self.side):  # HAZARD: api-misuse
            logits, bits = self._decode(x)
        log.info("watermark decoder graph captured")  # CLEAN: plain string, no tensor formatted
        self.io[hw] = (x, logits, bits)

    @torch.no_grad()
    def verify(self, images, claimed_payloads):
        x, logits, bits = self.io[tuple(images.shape[-2:])]
        x.copy_(images)
        self.g.replay()
        decoded = bits.int().tolist()  # CLEAN: read after the replay, outside the capture
        return [sum(a == b for a, b in zip(d, c)) / N_BITS for d, c in zip(decoded, claimed_payloads)]
