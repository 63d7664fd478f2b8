"""Neural film-grain synthesis for the video finishing tool (post-production look).

A small conv net shapes Gaussian noise into the grain of a scanned stock (Kodak 5219,
Ilford HP5 ...) given the luma of the frame. Luma grain and chroma grain are generated
per frame; the grain pass is captured once per output resolution.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GrainShaper(nn.Module):
    def __init__(self, ch=16):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(2, ch, 5, padding=2), nn.GELU(),
            nn.Conv2d(ch, ch, 5, padding=2), nn.GELU(),
            nn.Conv2d(ch, 1, 3, padding=1))

    def forward(self, noise, luma):
        return self.net(torch.cat([noise, luma], 1))


class GrainPass:
    def __init__(self, shaper, chroma_shaper, iso=400):
        self.shaper = shaper.cuda().eval()
        self.chroma_shaper = chroma_shaper.cuda().eval()
        self.iso = iso
        self.frame_idx = 0
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(5219)
        self.chroma_stream = torch.cuda.Stream()
        self.pool = torch.cuda.graph_pool_handle()
        self.graph = torch.cuda.CUDAGraph()
        self.frame_in = None

    def set_stock(self, iso):
        self.iso = iso

    @torch.no_grad()
    def _grain(self):
        torch.cuda.manual_seed(self.frame_idx)  # HAZARD: rng
        rgb = self.frame_in
        luma = (0.2126 * rgb[:, 0:1] + 0.7152 * rgb[:, 1:2] + 0.0722 * rgb[:, 2:3])
        noise = torch.randn(luma.shape, device="cuda", generator=self.gen)  # CLEAN: generator registered with the graph
        strength = self.iso / 1600.0  # HAZARD: python-scalar
        grain = self.shaper(noise, luma) * strength * (1.0 - luma).clamp_min(0.1)
        with torch.cuda.stream(self.chroma_stream):  # HAZARD: stream
            cn = torch.randn(rgb.shape[0], 2, *rgb.shape[-2:], device="cuda")
            chroma = F.avg_pool2d(cn, 3, 1, 1) * 0.3 * strength
        out = rgb + grain
        out[:, 0:1] += chroma[:, 0:1]
        out[:, 2:3] += chroma[:, 1:2]
        return out.clamp(0.0, 1.0)

    def set_resolution(self, h, w):
        self.frame_in = torch.zeros(1, 3, h, w, device="cuda")
        self.graph.register_generator_state(self.gen)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._grain()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph, pool=self.pool):  # HAZARD: api-misuse
            self.out = self._grain()

    def apply(self, frame):
        self.frame_idx += 1
        self.frame_in.copy_(frame)  # CLEAN: static input written in place
        self.graph.replay()
        return self.out


def render_timeline(grain, clips, writer):
    for clip in clips:
        grain.set_resolution(*clip.resolution)
        grain.set_stock(clip.stock_iso)
        for frame in clip.frames():
            out = grain.apply(frame.cuda())
            writer.write(out.mul(255).byte().cpu())  # CLEAN: eager readback for the encoder, after replay
    with torch.random.fork_rng(devices=[0]):  # CLEAN: preview noise outside any capture
        torch.cuda.manual_seed(0)
        preview = torch.randn(1, 1, 64, 64, device="cuda")
    return preview
