"""RIFE-style video frame interpolation; one CUDA graph per frame resolution, shared pool."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def warp(img, flow):
    B, _, H, W = img.shape
    ys, xs = torch.meshgrid(torch.linspace(-1, 1, H, device=img.device),
                            torch.linspace(-1, 1, W, device=img.device), indexing="ij")
    gx = xs[None] + flow[:, 0] * (2.0 / (W - 1))
    gy = ys[None] + flow[:, 1] * (2.0 / (H - 1))
    return F.grid_sample(img, torch.stack([gx, gy], -1), align_corners=True, padding_mode="border")


class IFBlock(nn.Module):
    def __init__(self, c_in, c=96):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(c_in, c, 3, 2, 1), nn.PReLU(c),
                                 nn.Conv2d(c, c, 3, 1, 1), nn.PReLU(c),
                                 nn.ConvTranspose2d(c, 5, 4, 2, 1))

    def forward(self, x):
        out = self.net(x)
        return out[:, :4], out[:, 4:5]


class IFNet(nn.Module):
    def __init__(self, flow_scale=1.0):
        super().__init__()
        self.block0 = IFBlock(7)
        self.block1 = IFBlock(11)
        self.flow_scale = flow_scale

    def forward(self, f0, f1, t):  # t: (1, 1, 1, 1) tensor in (0, 1)
        x = torch.cat([f0, f1, t.expand_as(f0[:, :1])], 1)
        flow, mask = self.block0(x)
        flow = flow * self.flow_scale  # CLEAN: flow_scale is set at construction and never changed
        w0, w1 = warp(f0, flow[:, :2]), warp(f1, flow[:, 2:])
        d, mask = self.block1(torch.cat([x, w0 - w1, mask], 1))
        flow = flow + d
        w0, w1 = warp(f0, flow[:, :2]), warp(f1, flow[:, 2:])
        m = torch.sigmoid(mask)
        hard = ((m - 0.5).abs() > 0.45).nonzero(as_tuple=True)  # HAZARD: dynamic-shape
        m = m.index_put(hard, m[hard].round())
        return w0 * m + w1 * (1 - m)


class InterpRunner:
    def __init__(self, model, resolutions=((720, 1280), (1080, 1920))):
        self.model = model.cuda().eval()
        self.pool = torch.cuda.graph_pool_handle()
        self.stream = torch.cuda.Stream()
        self.graphs, self.io = {}, {}
        self.resolutions = list(resolutions)

    def _alloc(self, hw):
        f0 = torch.zeros(1, 3, *hw, device="cuda")
        return f0, torch.zeros_like(f0), torch.full((1, 1, 1, 1), 0.5, device="cuda")

    @torch.no_grad()
    def prepare(self):
        for hw in sorted(self.resolutions, reverse=True):
            f0, f1, t = self._alloc(hw)
            self.stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.stream):
                for _ in range(3):
                    self.model(f0, f1, t)
            torch.cuda.current_stream().wait_stream(self.stream)
            g = torch.cuda.CUDAGraph()
            with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
                with torch.cuda.graph(g, pool=self.pool, stream=self.stream):  # CLEAN: capture on the runner's side stream after warm-up
                    out = self.model(f0, f1, t)
                    torch.cuda.empty_cache()  # HAZARD: memory
            self.graphs[hw], self.io[hw] = g, (f0, f1, t, out)

    @torch.no_grad()
    def add_resolution(self, hw):
        f0, f1, t = self._alloc(hw)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool, stream=self.stream):  # HAZARD: api-misuse
            out = self.model(f0, f1, t)
        self.graphs[hw], self.io[hw] = g, (f0, f1, t, out)

    @torch.no_grad()
    def interpolate(self, a, b, n_mid=1):
        hw = tuple(a.shape[-2:])
        if hw not in self.graphs:
            self.add_resolution(hw)
        f0, f1, t, out = self.io[hw]
        f0.copy_(a)
        f1.copy_(b)
        frames = []
        for k in range(1, n_mid + 1):
            t.fill_(k / (n_mid + 1))  # CLEAN: timestep written into the static tensor before replay
            self.graphs[hw].replay()
            frames.append(out.float().clone())
        return frames
