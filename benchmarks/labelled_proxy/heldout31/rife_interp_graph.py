"""RIFE-style video frame interpolation (IFNet, 3 scales) for 2x/4x slow motion.

The assistant wrapped IFNet in `GraphedIFNet`: one CUDA graph per padded resolution, all
graphs in one memory pool, fp16 "for the tensor cores".
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def warp(img, flow):
    b, _, h, w = img.shape
    gy, gx = torch.meshgrid(torch.linspace(-1, 1, h, device=img.device), torch.linspace(-1, 1, w, device=img.device), indexing="ij")
    grid = torch.stack([gx, gy], -1).unsqueeze(0)
    flow = torch.cat([flow[:, 0:1] / ((w - 1) / 2), flow[:, 1:2] / ((h - 1) / 2)], 1)
    return F.grid_sample(img, grid + flow.permute(0, 2, 3, 1), mode="bilinear", padding_mode="border", align_corners=True)  # CLEAN: grid_sample is capturable


class IFBlock(nn.Module):
    def __init__(self, cin, c=128):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(cin, c, 3, 2, 1), nn.PReLU(c), nn.Conv2d(c, c, 3, 1, 1), nn.PReLU(c), nn.Conv2d(c, c, 3, 1, 1), nn.PReLU(c))
        self.last = nn.ConvTranspose2d(c, 5, 4, 2, 1)

    def forward(self, x, flow, scale):
        x = F.interpolate(x, scale_factor=1.0 / scale, mode="bilinear", align_corners=False)
        flow = F.interpolate(flow, scale_factor=1.0 / scale, mode="bilinear", align_corners=False) / scale
        out = self.last(self.conv(torch.cat([x, flow], 1)))
        out = F.interpolate(out, scale_factor=scale, mode="bilinear", align_corners=False)
        return out[:, :4] * scale, out[:, 4:5]


class IFNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([IFBlock(7 + 4), IFBlock(7 + 4 + 3), IFBlock(7 + 4 + 3)])
        self.timestep = 0.5

    def forward(self, img0, img1):
        t = self.timestep  # HAZARD: python-scalar
        tmap = torch.full_like(img0[:, :1], t)
        flow = torch.zeros_like(img0[:, :2]).repeat(1, 2, 1, 1)
        mask = torch.zeros_like(img0[:, :1])
        w0, w1 = img0, img1
        for i, (blk, scale) in enumerate(zip(self.blocks, (4, 2, 1))):
            extra = [] if i == 0 else [torch.sigmoid(mask).expand(-1, 3, -1, -1)]
            x = torch.cat([w0, w1, tmap] + extra, 1)
            df, dm = blk(x, flow, scale)
            flow, mask = flow + df, mask + dm
            w0, w1 = warp(img0, flow[:, :2]), warp(img1, flow[:, 2:4])
        m = torch.sigmoid(mask)
        return (w0 * m + w1 * (1 - m)).clamp(0, 1)


class GraphedIFNet:
    def __init__(self, net):
        self.net = net.cuda().eval()
        self.pool = torch.cuda.graph_pool_handle()  # CLEAN: one pool shared by graphs that never run concurrently
        self.graphs = {}

    @torch.no_grad()
    def _capture(self, h, w, warmup):
        i0 = torch.zeros(1, 3, h, w, device="cuda")
        i1 = torch.zeros_like(i0)
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            if warmup:
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(3):
                        self.net(i0, i1)
                torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):  # HAZARD: api-misuse
                out = self.net(i0, i1)
                torch.cuda.empty_cache()  # HAZARD: memory
        self.graphs[(h, w)] = (g, i0, i1, out)

    def warmup(self, sizes):
        for h, w in sorted(sizes, reverse=True):
            self._capture(h, w, warmup=True)

    def __call__(self, f0, f1, t=0.5):
        h, w = f0.shape[-2:]
        ph, pw = (h + 31) // 32 * 32, (w + 31) // 32 * 32
        if (ph, pw) not in self.graphs:
            self._capture(ph, pw, warmup=False)  # late resolution: capture straight away
        g, i0, i1, out = self.graphs[(ph, pw)]
        i0.copy_(F.pad(f0, (0, pw - w, 0, ph - h)))  # CLEAN: copy_ into the static input
        i1.copy_(F.pad(f1, (0, pw - w, 0, ph - h)))
        self.net.timestep = t
        g.replay()
        return out[..., :h, :w]


def interpolate_video(model, frames, factor=4):
    out_frames = []
    for a, b in zip(frames[:-1], frames[1:]):
        out_frames.append(a)
        for k in range(1, factor):
            out_frames.append(model(a, b, t=k / factor))  # HAZARD: static-address
    out_frames.append(frames[-1])
    return out_frames


def preview_pair(model, a, b):
    mid = model(a, b).clone()  # CLEAN: cloned before the next replay
    return torch.cat([a, mid, b], dim=-1)
