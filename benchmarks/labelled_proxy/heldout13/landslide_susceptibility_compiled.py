"""Landslide susceptibility mapping from a 10 m DEM, lithology and land cover for
a regional geohazard service. The production model is compiled with
`model.forward = torch.compile(model.forward, mode="max-autotune")`; a review
copy used by geologists is compiled without CUDA graphs.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

TILE = 256


def terrain_features(dem):
    dzdx = F.pad(dem[..., :, 2:] - dem[..., :, :-2], (1, 1)) / 20.0
    dzdy = F.pad(dem[..., 2:, :] - dem[..., :-2, :], (0, 0, 1, 1)) / 20.0
    slope = torch.atan(torch.sqrt(dzdx ** 2 + dzdy ** 2))
    curvature = dem - F.avg_pool2d(dem, 3, 1, 1, count_include_pad=False)
    rough = F.max_pool2d(dem, 3, 1, 1) + F.max_pool2d(-dem, 3, 1, 1)
    return slope, curvature, rough


class SusceptibilityNet(nn.Module):
    def __init__(self, n_lith=12, n_cover=8):
        super().__init__()
        self.lith = nn.Embedding(n_lith, 8)
        self.cover = nn.Embedding(n_cover, 4)
        self.enc = nn.Sequential(
            nn.Conv2d(3 + 8 + 4, 64, 3, padding=1), nn.ReLU(),
            nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
            nn.Conv2d(64, 1, 1),
        )
        self.verbose = False

    def forward(self, dem, lith, cover):
        slope, curv, rough = terrain_features(dem)
        if self.verbose:
            print("mean slope (rad)", slope.mean())  # HAZARD: host-code
        cat = torch.cat([slope, curv, rough,
                         self.lith(lith).permute(0, 3, 1, 2), self.cover(cover).permute(0, 3, 1, 2)], 1)
        return torch.sigmoid(self.enc(cat))


@torch.compile(mode="max-autotune")
def hotspot_cells(prob, thr: float = 0.8):
    return (prob[0, 0] > thr).nonzero().tolist()  # HAZARD: host-sync


class SusceptibilityMapper:
    def __init__(self, model):
        self.model = model
        self.scenes = []

    @torch.no_grad()
    def map_padded(self, dem, lith, cover):
        H, W = dem.shape[-2:]
        ph, pw = (-H) % TILE, (-W) % TILE
        dem = F.pad(dem, (0, pw, 0, ph), mode="replicate")
        lith, cover = F.pad(lith, (0, pw, 0, ph)), F.pad(cover, (0, pw, 0, ph))
        out = torch.empty_like(dem)
        for i in range(0, H + ph, TILE):
            for j in range(0, W + pw, TILE):
                win = (..., slice(i, i + TILE), slice(j, j + TILE))
                out[win] = self.model(dem[win], lith[win], cover[win])  # CLEAN: fixed 256 x 256 tiles, copied out at once
        return out[..., :H, :W]

    @torch.no_grad()
    def quicklook(self, dem, lith, cover):
        prob = self.model(dem, lith, cover)  # HAZARD: dynamic-shape
        self.scenes.append(prob)  # HAZARD: static-address
        return prob


def make_models():
    live = SusceptibilityNet().cuda().eval()
    live.verbose = True
    live.forward = torch.compile(live.forward, mode="max-autotune")
    review = SusceptibilityNet().cuda().eval()
    review.load_state_dict(live.state_dict())
    review.forward = torch.compile(review.forward, mode="max-autotune-no-cudagraphs")
    return live, review


if __name__ == "__main__":
    live, review = make_models()
    mapper = SusceptibilityMapper(live)
    for H, W in [(900, 1300), (640, 512), (1210, 770)]:  # catchments of different extent
        dem = torch.rand(1, 1, H, W, device="cuda") * 1500
        lith = torch.randint(0, 12, (1, H, W), device="cuda")
        cover = torch.randint(0, 8, (1, H, W), device="cuda")
        full = mapper.map_padded(dem, lith, cover)
        mapper.quicklook(dem, lith, cover)
        checked = SusceptibilityMapper(review).quicklook(dem, lith, cover)  # CLEAN: review model compiled without CUDA graphs
        gauge_window = full[..., :512, :512].contiguous()
        print(H, W, len(hotspot_cells(gauge_window)), float((full - checked).abs().max()))  # CLEAN: fixed 512 x 512 window, one shape
