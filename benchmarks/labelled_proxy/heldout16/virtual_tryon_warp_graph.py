"""Virtual try-on for a fashion e-shop: warp a catalogue garment onto a shopper photo.

A flow regressor predicts how the flat garment image must be warped to fit the
person, then a compositor blends it in with the chosen colourway. One graph per
garment category (different flow heads), all sharing one pool, fp16.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORIES = ("tops", "dresses", "outerwear")
H, W = 256, 192


class FlowRegressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(6, 64, 4, 2, 1), nn.ReLU(), nn.Conv2d(64, 128, 4, 2, 1), nn.ReLU(),
                                 nn.Conv2d(128, 128, 4, 2, 1), nn.ReLU())
        self.flow = nn.Conv2d(128, 2, 3, padding=1)

    def forward(self, person, cloth):
        return 0.1 * torch.tanh(self.flow(self.enc(torch.cat([person, cloth], 1))))


class Compositor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(6, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 4, 3, padding=1))

    def forward(self, person, warped, palette):
        out = self.net(torch.cat([person, warped * palette], 1))
        alpha = torch.sigmoid(out[:, :1])
        return alpha * torch.sigmoid(out[:, 1:]) + (1 - alpha) * person


class TryOnService:
    def __init__(self):
        self.dev = torch.device("cuda")
        self.warp = nn.ModuleDict({c: FlowRegressor() for c in CATEGORIES}).to(self.dev).eval()
        self.comp = Compositor().to(self.dev).eval()
        self.fabric_palette = np.ones(3, np.float32)      # colourway picked on the product page
        self.cap_stream = torch.cuda.Stream()
        self.comp_stream = torch.cuda.Stream()
        self.pool = torch.cuda.graph_pool_handle()
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, H), torch.linspace(-1, 1, W), indexing="ij")
        self.base_grid = torch.stack([xs, ys], -1)[None].to(self.dev)
        self.static_person = torch.zeros(1, 3, H, W, device=self.dev)
        self.static_cloth = {c: torch.zeros(1, 3, H, W, device=self.dev) for c in CATEGORIES}
        self.graphs, self.outs = {}, {}
        for c in CATEGORIES:
            self._capture(c)

    def _render(self, cat):
        gen = torch.cuda.default_generators[0]
        self.look_state = gen.clone_state()  # HAZARD: rng
        wrinkle = 0.02 * torch.randn(1, 1, H, W, device=self.dev)
        person, cloth = self.static_person, self.static_cloth[cat]
        flow = F.interpolate(self.warp[cat](person, cloth), size=(H, W), mode="bilinear", align_corners=False)
        grid = self.base_grid + flow.permute(0, 2, 3, 1)
        warped = F.grid_sample(cloth, grid, align_corners=False) + wrinkle  # CLEAN: grid_sample is capturable after warm-up
        palette = torch.as_tensor(self.fabric_palette, device=self.dev)  # HAZARD: pinned-memory
        with torch.cuda.stream(self.comp_stream):  # HAZARD: stream
            img = self.comp(person, warped, palette.view(1, 3, 1, 1))
        return img

    @torch.no_grad()
    def _capture(self, cat):
        self.cap_stream.wait_stream(torch.cuda.current_stream())
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            with torch.cuda.stream(self.cap_stream):
                for _ in range(3):
                    self._render(cat)
            torch.cuda.current_stream().wait_stream(self.cap_stream)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool, stream=self.cap_stream):  # CLEAN: captured on a dedicated side stream
                self.outs[cat] = self._render(cat)
        self.graphs[cat] = g

    @torch.no_grad()
    def try_on(self, person_img, cloth_img, cat, colourway=None):
        if colourway is not None:
            self.fabric_palette[:] = colourway
        self.static_person = person_img.to(self.dev)  # HAZARD: static-address
        self.static_cloth[cat].copy_(cloth_img)  # CLEAN: copy_ into the static input
        self.graphs[cat].replay()
        return self.outs[cat].float().clamp(0, 1).cpu()


if __name__ == "__main__":
    svc = TryOnService()
    shopper = torch.rand(1, 3, H, W)
    for cat in CATEGORIES:
        img = svc.try_on(shopper, torch.rand(1, 3, H, W, device="cuda"), cat, colourway=[0.2, 0.3, 0.8])
        print(cat, img.shape)
