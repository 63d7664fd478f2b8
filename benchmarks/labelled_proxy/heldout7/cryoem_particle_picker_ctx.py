"""Topaz-style particle picking on cryo-EM micrographs, graphed through a helper.

Micrographs are phase-flipped with their CTF, scored by a small fully convolutional
classifier, non-maximum suppressed and turned into particle coordinates for
extraction. `graph_capture` is the shared capture helper of the processing service.
"""
import contextlib
import logging

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("picker")
MIC = 1024                         # binned micrograph side
PARTICLE_RADIUS = 12               # in binned pixels
MAX_PICKS = 600


@contextlib.contextmanager
def graph_capture(pool=None):
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, pool=pool, stream=stream):  # HAZARD: api-misuse
            yield graph
    torch.cuda.current_stream().wait_stream(stream)


class PickerNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 32, 7, padding=3), nn.BatchNorm2d(32), nn.LeakyReLU(0.1),
                                 nn.Conv2d(32, 64, 5, padding=2), nn.BatchNorm2d(64), nn.LeakyReLU(0.1),
                                 nn.Conv2d(64, 64, 5, padding=2, dilation=1), nn.LeakyReLU(0.1),
                                 nn.Conv2d(64, 1, 1))

    def forward(self, x):
        return self.net(x)


class MicrographPicker:
    def __init__(self, model, ctf_np, threshold=0.5, device="cuda"):
        self.model = model.eval().to(device)
        self.ctf_np = ctf_np.astype(np.complex64)            # CTF from CTFFIND, per micrograph group
        self.threshold = threshold
        self.static_mic = torch.zeros(1, 1, MIC, MIC, device=device)
        self.pool = torch.cuda.graph_pool_handle()
        self.graph = None

    def _phase_flip(self, mic):
        ctf = torch.from_numpy(self.ctf_np).to(mic.device, non_blocking=True)  # HAZARD: pinned-memory
        spec = torch.fft.rfft2(mic)
        return torch.fft.irfft2(spec * torch.sign(ctf.real), s=mic.shape[-2:])

    def _pick(self, mic):
        x = self._phase_flip(mic)
        x = (x - x.mean()) / x.std().clamp_min(1e-6)
        oy, ox = np.random.randint(0, 4, size=2)  # HAZARD: host-code
        x = torch.roll(x, shifts=(int(oy), int(ox)), dims=(-2, -1))
        score = torch.sigmoid(self.model(x))
        score = torch.roll(score, shifts=(-int(oy), -int(ox)), dims=(-2, -1))
        pooled = F.max_pool2d(score, 2 * PARTICLE_RADIUS + 1, stride=1, padding=PARTICLE_RADIUS)
        nms = torch.where(score == pooled, score, torch.zeros_like(score))  # CLEAN: NMS with torch.where, fixed shape
        coords = (nms[0, 0] > self.threshold).nonzero()  # HAZARD: dynamic-shape
        vals, idx = nms.flatten(1).topk(MAX_PICKS, dim=1)  # CLEAN: fixed-K top picks
        return coords, vals, idx

    @torch.no_grad()
    def build(self):
        with graph_capture(self.pool) as g:
            log.info("capturing picker graph for %dx%d micrographs", MIC, MIC)  # CLEAN: plain string log, no tensor
            self.static_out = self._pick(self.static_mic)
        self.graph = g

    @torch.no_grad()
    def pick(self, mic):
        self.static_mic.copy_(mic)  # CLEAN: copy_ into the captured input
        self.graph.replay()
        _, vals, idx = self.static_out
        keep = vals[0] > self.threshold
        flat = idx[0][keep]
        return torch.stack([flat // MIC, flat % MIC], -1).cpu().numpy()
