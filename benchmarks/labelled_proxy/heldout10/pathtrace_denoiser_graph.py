"""Real-time denoiser for a path-traced renderer (1 spp -> display).

A kernel-predicting network runs over noisy radiance, albedo, normals and depth,
followed by temporal accumulation with motion-vector reprojection. The swap
chain fixes the resolution, so the whole per-frame denoise is captured once with
capture_begin/capture_end and replayed every frame.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

K = 5


class KernelPredictor(nn.Module):
    def __init__(self, c_in=10, width=32):
        super().__init__()
        self.enc = nn.Sequential(
            nn.Conv2d(c_in, width, 3, padding=1), nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1), nn.ReLU(),
            nn.Conv2d(width, K * K + 1, 3, padding=1),
        )

    def forward(self, g):
        out = self.enc(g)
        return torch.softmax(out[:, :-1], dim=1), torch.sigmoid(out[:, -1:])


class Denoiser:
    def __init__(self, net, h, w, device="cuda", low_vram=False):
        self.net = net.to(device).eval()
        self.h, self.w, self.device = h, w, device
        self.low_vram = low_vram
        z = lambda c: torch.zeros(1, c, h, w, device=device)
        self.noisy, self.albedo, self.normal, self.depth = z(3), z(3), z(3), z(1)
        self.motion = torch.zeros(1, h, w, 2, device=device)
        self.history, self.moments = z(3), z(2)
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, h, device=device),
                                torch.linspace(-1, 1, w, device=device), indexing="ij")
        self.base_grid = torch.stack([xs, ys], -1).unsqueeze(0)
        self.graph = torch.cuda.CUDAGraph()
        self.out = None

    def _reproject(self, buf):
        return F.grid_sample(buf, self.base_grid + self.motion, align_corners=True)

    def _filter(self, radiance, kernels):
        patches = F.unfold(radiance, K, padding=K // 2).view(1, 3, K * K, self.h, self.w)
        return (patches * kernels.unsqueeze(1)).sum(2)

    def _frame(self):
        g = torch.cat([self.noisy, self.albedo, self.normal, self.depth], 1)
        kernels, alpha = self.net(g)
        filtered = self._filter(self.noisy / (self.albedo + 1e-3), kernels) * self.albedo
        prev = self._reproject(self.history)
        valid = prev.sum(1, keepdim=True) > 0
        blended = torch.where(valid, alpha * filtered + (1 - alpha) * prev, filtered)  # CLEAN: torch.where for disocclusion, no data-dependent shape
        lum = blended.mean(1, keepdim=True)
        new_moments = torch.cat([lum, lum * lum], 1) * 0.2 + self._reproject(self.moments) * 0.8
        self.moments.copy_(new_moments)  # CLEAN: in-place update of a captured buffer
        self.history = blended  # HAZARD: static-address
        if self.low_vram:
            torch.cuda.empty_cache()  # HAZARD: memory
        return blended

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.autocast("cuda", dtype=torch.float16), torch.no_grad():  # HAZARD: autocast-cache
            with torch.cuda.stream(s):  # CLEAN: warm-up side stream, forked and joined before the capture
                for _ in range(3):
                    self._frame()
            torch.cuda.current_stream().wait_stream(s)
            self.graph.capture_begin()  # HAZARD: stream
            self.out = self._frame()
            self.graph.capture_end()
        torch.cuda.synchronize()  # CLEAN: synchronize after capture_end, outside the graph

    def present(self, noisy, albedo, normal, depth, motion):
        for dst, src in ((self.noisy, noisy), (self.albedo, albedo), (self.normal, normal),
                         (self.depth, depth), (self.motion, motion)):
            dst.copy_(src, non_blocking=True)  # CLEAN: device-to-device copy into the static inputs
        self.graph.replay()
        return self.out


def run(renderer, weights="kpn_denoiser.pt"):
    net = KernelPredictor()
    net.load_state_dict(torch.load(weights, map_location="cpu"))
    total = torch.cuda.get_device_properties(0).total_memory
    den = Denoiser(net, renderer.height, renderer.width, low_vram=total < 12 * 2 ** 30)
    den.capture()
    while renderer.running:
        gbuf = renderer.trace_frame()
        img = den.present(gbuf.radiance, gbuf.albedo, gbuf.normal, gbuf.depth, gbuf.motion)
        renderer.blit(img)
