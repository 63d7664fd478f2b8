"""Dark-target aerosol optical depth (AOD) retrieval with a learned inversion net.

Tiles of top-of-atmosphere reflectance (7 MODIS-like bands) are grouped by tile
count into buckets; there is one CUDA graph per bucket and all of them share one
memory pool (captured largest first so the small buckets reuse its blocks).
"""
import numpy as np
import torch
import torch.nn as nn

BANDS = 7
RAYLEIGH_TAU = [0.31, 0.16, 0.098, 0.062, 0.037, 0.012, 0.004]
BUCKETS = (64, 32, 16)


class AODNet(nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.enc = nn.Sequential(
            nn.Conv2d(BANDS + 3, hidden, 3, padding=1), nn.GELU(),
            nn.Conv2d(hidden, hidden, 3, padding=1), nn.GELU(),
        )
        self.head = nn.Conv2d(hidden, 2, 1)  # AOD at 550 nm, Angstrom exponent

    def forward(self, x):
        return self.head(self.enc(x))


class AODRetriever:
    def __init__(self, model, albedo_clim: np.ndarray, tile=32, device="cuda"):
        self.dev = torch.device(device)
        self.model = model.to(self.dev).eval()
        self.albedo_np = albedo_clim            # (12, 3, tile, tile) monthly surface albedo, pageable
        self.month = 0
        self.cloud_thr = 0.35
        self.glint_deg = 40.0
        self.tile = tile
        self.rayleigh = torch.tensor(RAYLEIGH_TAU, device=self.dev).view(1, BANDS, 1, 1)  # CLEAN: built once in __init__, before any capture
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.static_in, self.static_out = {}, {}, {}
        self.products = []

    def set_geometry(self, month, glint_deg):
        self.month = month
        self.glint_deg = glint_deg

    def _retrieve(self, refl, glint):
        albedo = torch.from_numpy(self.albedo_np[self.month]).to(self.dev, non_blocking=True)  # HAZARD: pinned-memory
        corrected = refl - self.rayleigh
        x = torch.cat([corrected, albedo.expand(refl.shape[0], -1, -1, -1)], dim=1)
        out = self.model(x)
        aod = out[:, 0].clamp_min(0.0)
        glint_ok = glint > self.glint_deg  # HAZARD: python-scalar
        clear = (refl[:, 0] < self.cloud_thr) & glint_ok
        aod = torch.where(clear, aod, torch.full_like(aod, float("nan")))  # CLEAN: torch.where keeps the tile shape
        clear_mean = aod[clear].mean()  # HAZARD: dynamic-shape
        return aod, out[:, 1], clear_mean

    @torch.no_grad()
    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        for n in BUCKETS:
            refl = torch.zeros(n, BANDS, self.tile, self.tile, device=self.dev)
            glint = torch.zeros(n, self.tile, self.tile, device=self.dev)
            with torch.cuda.stream(side):
                for _ in range(3):
                    self._retrieve(refl, glint)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):
                self.static_out[n] = self._retrieve(refl, glint)
            self.graphs[n], self.static_in[n] = g, (refl, glint)

    def run(self, refl, glint):
        n = next(b for b in reversed(BUCKETS) if b >= refl.shape[0])
        s_refl, s_glint = self.static_in[n]
        s_refl[: refl.shape[0]].copy_(refl)  # CLEAN: in-place copy into the static input
        s_glint[: refl.shape[0]].copy_(glint)
        self.graphs[n].replay()
        return self.static_out[n]

    def run_day(self, granules):
        for refl, glint in granules:
            aod, angstrom, _ = self.run(refl, glint)
            self.products.append(aod)  # HAZARD: static-address
        return self.products


if __name__ == "__main__":
    clim = np.random.rand(12, 3, 32, 32).astype(np.float32)
    retr = AODRetriever(AODNet(), clim)
    retr.capture()
    retr.set_geometry(month=6, glint_deg=35.0)
    granules = [
        (torch.rand(20, BANDS, 32, 32, device="cuda"), torch.rand(20, 32, 32, device="cuda") * 90.0)
        for _ in range(4)
    ]
    maps = retr.run_day(granules)
    qa = retr.static_out[32][2].item()  # CLEAN: host read after the replay, outside the capture
    print(f"granules={len(maps)} clear-sky mean AOD={qa:.3f}")
