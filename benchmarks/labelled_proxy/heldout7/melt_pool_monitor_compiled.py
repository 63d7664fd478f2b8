"""In-situ melt-pool monitoring for laser powder-bed fusion (coaxial high-speed camera).

Each frame is background-subtracted, segmented and the melt-pool geometry regressed;
spatter particles are located for the layer report. The model forward is replaced
by its compiled version (mode="max-autotune") on the monitoring PC.
"""
import torch
import torch.nn as nn

H = W = 128


class MeltPoolNet(nn.Module):
    def __init__(self, w=32):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(2, w, 3, padding=1), nn.ReLU(), nn.Conv2d(w, 2 * w, 3, stride=2, padding=1),
                                 nn.ReLU(), nn.Conv2d(2 * w, 2 * w, 3, padding=1), nn.ReLU())
        self.seg_head = nn.Sequential(nn.ConvTranspose2d(2 * w, w, 2, stride=2), nn.ReLU(), nn.Conv2d(w, 1, 1))
        self.geom_head = nn.Sequential(nn.Linear(2 * w, 64), nn.ReLU(), nn.Linear(64, 3))   # width, length, depth (um)

    def forward(self, frame):
        h = self.enc(frame)
        seg = torch.sigmoid(self.seg_head(h))
        geom = self.geom_head(h.mean((-2, -1)))
        area_px = (seg > 0.5).sum().item()  # HAZARD: host-sync
        spatter_yx = (frame[:, 0] > 0.9).nonzero()  # HAZARD: dynamic-shape
        return seg, geom, area_px, spatter_yx


def subtract_background(frame, bg):
    frame.sub_(bg).clamp_(min=0.0)  # HAZARD: static-address
    return frame / frame.amax(dim=(-2, -1), keepdim=True).clamp_min(1e-3)


class LayerMonitor:
    def __init__(self, model, background, max_width_um=180.0):
        self.model = model.eval().cuda()
        self.model.forward = torch.compile(self.model.forward, mode="max-autotune")
        self.preprocess = torch.compile(subtract_background, mode="max-autotune")
        self.bg = background.cuda()
        self.max_width = max_width_um
        self.anomalies, self.layer_maps, self.spatter_counts = [], [], []

    @torch.no_grad()
    def on_frame(self, frame_u8, layer_idx):
        x = self.preprocess(frame_u8.cuda().float() / 255.0, self.bg)
        seg, geom, area_px, spatter = self.model(x)
        self.spatter_counts.append(spatter.shape[0])
        if geom[0, 0].item() > self.max_width:
            self.anomalies.append(seg)  # HAZARD: static-address
        if layer_idx % 50 == 0:
            self.layer_maps.append(seg.clone())  # CLEAN: cloned before the next compiled call
        return geom[0].cpu()

    def layer_report(self):
        n = max(len(self.spatter_counts), 1)
        return {"anomalous_frames": len(self.anomalies), "mean_spatter": sum(self.spatter_counts) / n}


@torch.no_grad()
def reprocess_build(model, frames, background):
    """Offline: re-run a whole build from the archive after a parameter study."""
    offline = MeltPoolNet().cuda().eval()
    offline.load_state_dict(model.state_dict())
    fwd = torch.compile(offline.forward, mode="max-autotune-no-cudagraphs")
    bg = background.cuda()
    maps, spatter_xy = [], []
    for f in frames:
        x = (f.cuda().float() / 255.0 - bg).clamp(min=0.0)  # CLEAN: out-of-place background subtraction
        seg, geom, _, spatter = fwd(x / x.amax(dim=(-2, -1), keepdim=True).clamp_min(1e-3))
        maps.append(seg)  # CLEAN: no CUDA graphs in this compile, outputs are not reused
        spatter_xy.append(spatter.cpu())
    return torch.cat(maps), spatter_xy
