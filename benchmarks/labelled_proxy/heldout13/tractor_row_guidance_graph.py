"""Vision-based row guidance for an inter-row hoe (sugar beet, 50 cm rows).

Front and rear cameras each get their own CUDA graph (one per resolution, one
shared pool). The crop-row heading/offset drives the hydraulic side-shift.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

ROW_SPACING_M = 0.50


class RowNet(nn.Module):
    def __init__(self, n_bins=64):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 24, 5, 2, 2), nn.ReLU(),
            nn.Conv2d(24, 48, 3, 2, 1), nn.ReLU(),
            nn.Conv2d(48, 48, 3, 2, 1), nn.ReLU(),
        )
        self.heading = nn.Linear(48, n_bins)  # heading histogram over [-30, 30] deg
        self.offset = nn.Linear(48, 1)
        self.conf = nn.Linear(48, 1)

    def forward(self, img):
        f = self.backbone(img).mean(dim=(2, 3))
        return self.heading(f), self.offset(f), torch.sigmoid(self.conf(f))


class RowGuidance:
    def __init__(self, net, device="cuda"):
        self.dev = device
        self.net = net.to(device).eval()
        self.row_bins = list(range(16, 48))  # central +-15 deg of the heading histogram
        self.bin_deg = torch.linspace(-30, 30, 64, device=device)
        self.speed_kmh = 6.0
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.inputs, self.outputs = {}, {}, {}
        self.history = []

    def _guide(self, img):
        logits, offset, conf = self.net(img)
        central = logits[:, self.row_bins]  # HAZARD: host-sync
        p = F.softmax(central, dim=-1)
        heading = (p * self.bin_deg[16:48]).sum(-1)
        lookahead_m = 1.5 + 0.25 * self.speed_kmh  # HAZARD: python-scalar
        lateral = offset.squeeze(-1) + lookahead_m * torch.tan(torch.deg2rad(heading))
        if (conf < 0.2).all():  # HAZARD: dynamic-control-flow
            lateral = torch.zeros_like(lateral)  # lost the rows: hold the hitch centred
        return torch.clamp(lateral, -ROW_SPACING_M / 2, ROW_SPACING_M / 2), conf

    @torch.no_grad()
    @torch.autocast("cuda", dtype=torch.float16)  # HAZARD: autocast-cache
    def add_camera(self, name, h, w):
        img = torch.zeros(1, 3, h, w, device=self.dev)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._guide(img)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool):  # CLEAN: warmed up on a side stream just above
            self.outputs[name] = self._guide(img)
        self.graphs[name], self.inputs[name] = g, img

    def steer(self, name, frame):
        self.inputs[name].copy_(frame)  # CLEAN: in-place copy into the static input
        self.graphs[name].replay()
        lateral, conf = self.outputs[name]
        self.history.append(lateral.clone())  # CLEAN: cloned before it is kept across replays
        return lateral


if __name__ == "__main__":
    rg = RowGuidance(RowNet())
    rg.add_camera("front", 480, 640)
    rg.add_camera("rear", 360, 640)
    for t in range(1000):
        if t == 300:
            rg.speed_kmh = 9.0  # driver speeds up after the headland
        cmd = rg.steer("front", torch.rand(1, 3, 480, 640, device="cuda"))
        rg.steer("rear", torch.rand(1, 3, 360, 640, device="cuda"))
    print("side-shift (m):", cmd.item(), "logged:", len(rg.history))
