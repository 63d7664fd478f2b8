"""Runtime neural texture decompression for a streamed open-world renderer.

Each material is baked into small latent grids (one per mip level) plus a tiny MLP.
Every frame the streamer hands over the tiles that became resident and we decode
them to BC-ready texels. Tile counts per mip are fixed by the streaming budget, so
each mip level gets its own CUDA graph; all graphs share one memory pool.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

TILE = 32
LATENT_C = 12
TILES_PER_MIP = {0: 48, 1: 96, 2: 192}   # streaming budget per frame


class TexelMLP(nn.Module):
    def __init__(self, hidden=64, out_ch=8):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(LATENT_C + 3, hidden), nn.GELU(),
            nn.Linear(hidden, hidden), nn.GELU(),
            nn.Linear(hidden, out_ch),
        )

    def forward(self, x):
        return self.net(x)


class MipDecodeRunner:
    def __init__(self, mlp, channel_scale_np, normal_bias_np, device="cuda"):
        self.mlp = mlp.eval().to(device)
        self.device = device
        # per-channel scale from the asset bake; the hot-reload tool may re-bake it
        self.channel_scale_np = channel_scale_np.astype(np.float32)
        self.normal_bias = torch.from_numpy(normal_bias_np).to(device)  # CLEAN: uploaded once in __init__, outside any capture
        self.lod_bias = 0.0
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.static_lat, self.static_out = {}, {}, {}
        u = torch.linspace(-1.0, 1.0, TILE, device=device)
        gy, gx = torch.meshgrid(u, u, indexing="ij")
        self.grid = torch.stack([gx, gy], -1)

    def set_quality(self, preset):
        # called from the options menu while the game is running
        self.lod_bias = {"ultra": 0.0, "high": 0.5, "medium": 1.0, "low": 1.5}[preset]

    def _decode(self, mip, lat):
        n = lat.shape[0]
        grid = self.grid.expand(n, TILE, TILE, 2)
        feats = F.grid_sample(lat, grid, mode="bilinear", align_corners=True).permute(0, 2, 3, 1)
        lod = torch.full_like(feats[..., :1], mip + self.lod_bias)  # HAZARD: python-scalar
        texels = self.mlp(torch.cat([feats, grid, lod], dim=-1)).permute(0, 3, 1, 2)
        scale = torch.from_numpy(self.channel_scale_np).cuda()  # HAZARD: pinned-memory
        texels = texels * scale.view(1, -1, 1, 1)
        texels[:, 3:6] = texels[:, 3:6] + self.normal_bias.view(1, 3, 1, 1)
        if (texels[:, 6] < 0).any():  # HAZARD: dynamic-control-flow
            texels[:, 6] = texels[:, 6].clamp_min(0.0)
        return torch.where(torch.isfinite(texels), texels, torch.zeros_like(texels))  # CLEAN: torch.where keeps the shape and never syncs

    @torch.no_grad()
    def capture_all(self, lat_hw=16):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # CLEAN: warm-up stream, forked and joined outside the capture
            for mip, n in TILES_PER_MIP.items():
                hw = lat_hw >> mip
                lat = torch.zeros(n, LATENT_C, hw, hw, device=self.device)
                self.static_lat[mip] = lat
                for _ in range(3):
                    self._decode(mip, lat)
        torch.cuda.current_stream().wait_stream(side)
        for mip in sorted(TILES_PER_MIP, reverse=True):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):
                self.static_out[mip] = self._decode(mip, self.static_lat[mip])
            self.graphs[mip] = g

    def stream_in(self, mip, latents):
        """Full budget from the IO thread; latents already live on the GPU."""
        self.static_lat[mip] = latents  # HAZARD: static-address
        self.graphs[mip].replay()
        return self.static_out[mip]

    def stream_in_partial(self, mip, latents):
        n = latents.shape[0]
        self.static_lat[mip][:n].copy_(latents)  # CLEAN: copied into the captured input buffer
        self.static_lat[mip][n:].zero_()
        self.graphs[mip].replay()
        return self.static_out[mip][:n]

    def debug_dump(self, mip, path):
        tile = self.static_out[mip][0, :3].float().cpu().numpy()  # CLEAN: host read after the replay, outside the graph
        np.save(path, tile)


if __name__ == "__main__":
    runner = MipDecodeRunner(TexelMLP(), np.ones(8), np.zeros(3, np.float32))
    runner.capture_all()
    runner.set_quality("medium")
    for frame in range(600):
        for mip, n in TILES_PER_MIP.items():
            hw = 16 >> mip
            lat = torch.randn(n, LATENT_C, hw, hw, device="cuda")
            if frame % 4 == 0:
                runner.stream_in(mip, lat)
            else:
                runner.stream_in_partial(mip, lat[: n // 2])
    runner.debug_dump(0, "/tmp/mip0.npy")
