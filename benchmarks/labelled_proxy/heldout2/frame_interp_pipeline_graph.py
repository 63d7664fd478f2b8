"""Video frame interpolation: decoded frames arrive as numpy arrays, the network runs as a graph."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class FlowNet(nn.Module):
    def __init__(self, ch=64):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(6, ch, 3, padding=1), nn.ReLU(), nn.Conv2d(ch, ch, 3, padding=1), nn.ReLU())
        self.flow = nn.Conv2d(ch, 4, 3, padding=1)

    def forward(self, a, b, t):
        f = self.flow(self.enc(torch.cat([a, b], 1)))
        fa, fb = f[:, :2] * t, f[:, 2:] * (1 - t)
        H, W = a.shape[-2:]
        base = torch.stack(torch.meshgrid(torch.linspace(-1, 1, H, device=a.device),
                                          torch.linspace(-1, 1, W, device=a.device), indexing="ij")[::-1], -1)
        wa = F.grid_sample(a, base + fa.permute(0, 2, 3, 1), align_corners=True)
        wb = F.grid_sample(b, base + fb.permute(0, 2, 3, 1), align_corners=True)
        return wa * (1 - t) + wb * t


class Interpolator:
    def __init__(self, net, h=1080, w=1920):
        self.net = net.cuda().eval().half()
        self.pool = torch.cuda.graph_pool_handle()
        self.h2d = torch.cuda.Stream()
        self.cap = torch.cuda.Stream()
        self.frame_a = np.zeros((h, w, 3), dtype=np.uint8)
        self.frame_b = np.zeros((h, w, 3), dtype=np.uint8)
        self.pinned_b = torch.empty(h, w, 3, dtype=torch.uint8).pin_memory()
        self.dev_a = torch.zeros(1, 3, h, w, device="cuda", dtype=torch.half)
        self.t = torch.full((1, 1, 1, 1), 0.5, device="cuda", dtype=torch.half)
        self.graph = torch.cuda.CUDAGraph()
        self.frames_done = 0

    def _upload(self):
        a = torch.from_numpy(self.frame_a).cuda(non_blocking=True)  # HAZARD: pinned-memory
        self.dev_a.copy_(a.permute(2, 0, 1)[None].half() / 255)
        b = self.pinned_b.cuda(non_blocking=True)  # CLEAN: copy from a persistent pinned buffer on the capture stream
        with torch.cuda.stream(self.h2d):  # HAZARD: stream
            b = b.permute(2, 0, 1)[None].half() / 255
        return self.dev_a, b

    @torch.inference_mode()
    def _run(self):
        a, b = self._upload()
        mid = self.net(a, b, self.t)
        self.frames_done += 1  # HAZARD: host-code
        return (mid.clamp(0, 1) * 255).to(torch.uint8)[0].permute(1, 2, 0)

    def capture(self):
        self.cap.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.cap):
            self.net(self.dev_a, self.dev_a, self.t)
            self.graph.capture_begin(pool=self.pool)  # CLEAN: capture begins on a side stream
            self.out = self._run()
            self.graph.capture_end()
        torch.cuda.current_stream().wait_stream(self.cap)

    def interpolate(self, frame_a: np.ndarray, frame_b: np.ndarray, t=0.5):
        self.frame_a[...] = frame_a
        self.pinned_b.numpy()[...] = frame_b  # CLEAN: pinned buffer refilled on the host before replay
        self.t.fill_(t)
        self.graph.replay()
        host = torch.empty(self.out.shape, dtype=torch.uint8).pin_memory()
        host.copy_(self.out, non_blocking=True)
        torch.cuda.current_stream().synchronize()
        return host.numpy()
