"""Precipitation nowcasting: a U-Net advances radar frames in 5-minute steps.

An ensemble of perturbed members is rolled out for LEAD_STEPS frames inside one
captured graph (capture_begin / capture_end), replayed every radar scan.
"""
import numpy as np
import torch
import torch.nn.functional as F

LEAD_STEPS, N_MEMBERS, CTX = 12, 8, 4


class NowcastEngine:
    def __init__(self, unet, orography, height=512, width=512, max_rate=120.0):
        self.unet = unet.eval().cuda()
        self.orography = orography  # numpy (H, W), static terrain field
        self.hw = (height, width)
        self.max_rate = max_rate  # mm/h cap, switched between convective / stratiform regimes
        self.ctx = torch.zeros(N_MEMBERS, CTX, height, width, device="cuda")
        self.ens_gen = torch.Generator(device="cuda")
        self.ens_gen.manual_seed(2024)
        self.graph = torch.cuda.CUDAGraph()

    def _perturb(self, x):
        eps = torch.randn(x.shape, device=x.device, generator=self.ens_gen)  # HAZARD: rng
        eps = F.avg_pool2d(eps, 9, stride=1, padding=4)
        return x * (1.0 + 0.1 * eps)

    def _advance(self, ctx, terrain):
        inp = torch.cat([ctx, terrain.expand(ctx.shape[0], 1, -1, -1)], 1)
        nxt = self.unet(inp).squeeze(1)
        nxt = torch.nan_to_num(nxt, nan=0.0).clamp_min(0.0)  # CLEAN: device-side cleanup, fixed shape
        return torch.clamp(nxt, max=self.max_rate)  # HAZARD: python-scalar

    def _rollout(self):
        terrain = torch.from_numpy(self.orography).float().to("cuda")  # HAZARD: pinned-memory
        terrain = F.interpolate(terrain[None, None], size=self.hw, mode="bilinear")  # CLEAN: static target size
        ctx = self._perturb(self.ctx)
        frames = []
        for _ in range(LEAD_STEPS):
            nxt = self._advance(ctx, terrain)
            frames.append(nxt)
            ctx = torch.cat([ctx[:, 1:], nxt[:, None]], 1)
        out = torch.stack(frames, 1)
        wet = out.mean(1).cpu().numpy() > 0.1  # HAZARD: host-sync
        self.wet_fraction = float(wet.mean())
        return out

    @torch.no_grad()
    def capture(self):
        for _ in range(2):
            self._rollout()
        torch.cuda.synchronize()
        self.graph.capture_begin()  # HAZARD: stream
        self.forecast = self._rollout()
        self.graph.capture_end()

    @torch.no_grad()
    def update(self, last_frames, regime):
        self.max_rate = 200.0 if regime == "convective" else 80.0
        self.ctx.copy_(last_frames.expand(N_MEMBERS, -1, -1, -1))  # CLEAN: copy_ into the captured context buffer
        self.graph.replay()
        probs = (self.forecast > 1.0).float().mean(1)
        return probs.cpu().numpy().astype(np.float16)  # CLEAN: read-back after replay, outside the captured region
