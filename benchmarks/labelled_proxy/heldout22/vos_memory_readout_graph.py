"""XMem-style semi-supervised video object segmentation: key/value memory readout with a FIFO working
memory, captured once per resolution. The config is a hydra-style structured dataclass."""
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

@dataclass
class VOSConfig:
    key_dim: int = 64
    value_dim: int = 256
    mem_frames: int = 8
    top_k: int = 30
    height: int = 480
    width: int = 864

class KeyEncoder(nn.Module):
    def __init__(self, key_dim):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 64, 7, 4, 3), nn.ReLU(), nn.Conv2d(64, 128, 3, 2, 1), nn.ReLU(),
                                 nn.Conv2d(128, key_dim, 3, 2, 1))

    def forward(self, frame):
        return self.net(frame)

class ValueEncoder(nn.Module):
    def __init__(self, value_dim):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(4, 64, 7, 4, 3), nn.ReLU(), nn.Conv2d(64, 128, 3, 2, 1), nn.ReLU(),
                                 nn.Conv2d(128, value_dim, 3, 2, 1))

    def forward(self, frame, mask):
        return self.net(torch.cat([frame, mask], 1))

class MaskDecoder(nn.Module):
    def __init__(self, value_dim):
        super().__init__()
        self.fuse = nn.Conv2d(value_dim, 64, 3, 1, 1)
        self.out = nn.Conv2d(64, 1, 3, 1, 1)

    def forward(self, readout, size):
        x = F.relu(self.fuse(readout))
        return F.interpolate(self.out(x), size=size, mode="bilinear", align_corners=False)

class MemoryEngine:
    def __init__(self, cfg: VOSConfig):
        self.cfg = cfg
        self.key_enc = KeyEncoder(cfg.key_dim).cuda().eval()
        self.val_enc = ValueEncoder(cfg.value_dim).cuda().eval()
        self.dec = MaskDecoder(cfg.value_dim).cuda().eval()
        self.h, self.w = cfg.height // 16, cfg.width // 16
        self.hw = self.h * self.w
        self.mem_k = torch.zeros(1, cfg.key_dim, cfg.mem_frames * self.hw, device="cuda")
        self.mem_v = torch.zeros(1, cfg.value_dim, cfg.mem_frames * self.hw, device="cuda")
        self.frame = torch.zeros(1, 3, cfg.height, cfg.width, device="cuda")
        self.prev_mask = torch.zeros(1, 1, cfg.height, cfg.width, device="cuda")
        self.graph = torch.cuda.CUDAGraph()
        self.last_step_t = 0.0

    def _step(self):
        k = self.key_enc(self.frame).flatten(2)
        sim = torch.einsum("bcm,bcn->bmn", self.mem_k, k) / self.cfg.key_dim ** 0.5
        top_v, top_i = sim.topk(self.cfg.top_k, dim=1)  # CLEAN: fixed-k topk is capturable
        weights = torch.zeros_like(sim).scatter_(1, top_i, top_v.softmax(1))
        readout = torch.bmm(self.mem_v, weights).view(1, -1, self.h, self.w)
        mask = self.dec(readout, (self.cfg.height, self.cfg.width)).sigmoid()
        if self.prev_mask.sum() == 0:  # HAZARD: dynamic-control-flow
            mask = torch.zeros_like(mask)
        self.prev_mask.copy_(mask)
        v = self.val_enc(self.frame, mask).flatten(2)
        self.mem_k.copy_(torch.roll(self.mem_k, -self.hw, dims=2))  # CLEAN: in-place FIFO shift keeps the address
        self.mem_v.copy_(torch.roll(self.mem_v, -self.hw, dims=2))
        self.mem_k[:, :, -self.hw:] = k
        self.mem_v[:, :, -self.hw:] = v
        self.last_step_t = time.perf_counter()  # HAZARD: host-code
        return mask

    @torch.no_grad()
    def capture(self):
        side = torch.cuda.Stream()
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    self._step()
            torch.cuda.current_stream().wait_stream(side)
            with torch.cuda.graph(self.graph):
                self.static_mask = self._step()

    @torch.no_grad()
    def init_object(self, frame, first_mask):
        self.prev_mask.copy_(first_mask)
        self.frame.copy_(frame)  # CLEAN: copy_ into the captured input

    @torch.no_grad()
    def track(self, frame):
        self.frame = F.interpolate(frame, size=(self.cfg.height, self.cfg.width), mode="bilinear")  # HAZARD: static-address
        self.graph.replay()
        return self.static_mask > 0.5

if __name__ == "__main__":
    engine = MemoryEngine(VOSConfig())
    engine.capture()
    engine.init_object(torch.rand(1, 3, 480, 864, device="cuda"), torch.ones(1, 1, 480, 864, device="cuda"))
    for t in range(200):
        masks = engine.track(torch.rand(1, 3, 720, 1280, device="cuda"))
