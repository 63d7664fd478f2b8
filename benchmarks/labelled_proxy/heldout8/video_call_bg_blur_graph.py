"""Background blur for a desktop video-call app.

A small MODNet-like matting net predicts an alpha matte for each webcam frame;
the background is blurred with a separable Gaussian and composited back.  One
graph is captured per camera resolution the first time that resolution is seen.
"""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class MattingNet(nn.Module):
    def __init__(self, ch=32):
        super().__init__()
        self.enc = nn.Sequential(
            nn.Conv2d(3, ch, 3, 2, 1), nn.ReLU(), nn.Conv2d(ch, ch * 2, 3, 2, 1), nn.ReLU(),
            nn.Conv2d(ch * 2, ch * 4, 3, 2, 1), nn.ReLU())
        self.dec = nn.Sequential(
            nn.Conv2d(ch * 4, ch * 2, 3, 1, 1), nn.ReLU(), nn.Conv2d(ch * 2, 1, 3, 1, 1))

    def forward(self, x):
        a = self.dec(self.enc(x))
        return torch.sigmoid(F.interpolate(a, size=x.shape[-2:], mode="bilinear", align_corners=False))


class BlurPipeline:
    def __init__(self, net, radius=12):
        self.net = net.cuda().eval()             # fp32 weights, run under fp16 autocast
        self.radius = radius
        self.blur_sigma = 6.0          # bound to the "blur strength" slider in the UI
        self.graphs = {}

    def set_blur_strength(self, level):
        self.blur_sigma = 2.0 + 1.5 * level

    def _kernel(self):
        xs = torch.arange(-self.radius, self.radius + 1, device="cuda", dtype=torch.float32)
        k = torch.exp(-xs ** 2 / (2 * self.blur_sigma ** 2))  # HAZARD: python-scalar
        return (k / k.sum()).half()

    def _blur(self, img):
        k = self._kernel()
        c = img.shape[1]
        kh = k.view(1, 1, 1, -1).expand(c, 1, 1, -1)
        kv = k.view(1, 1, -1, 1).expand(c, 1, -1, 1)
        img = F.conv2d(F.pad(img, (self.radius, self.radius, 0, 0), mode="reflect"), kh, groups=c)
        return F.conv2d(F.pad(img, (0, 0, self.radius, self.radius), mode="reflect"), kv, groups=c)

    def _step(self, st):
        frame = st["frame"]
        alpha = self.net(frame)
        st["ema"].mul_(0.6).add_(alpha, alpha=0.4)  # CLEAN: device-side temporal smoothing, in place
        if st["ema"].mean() < 0.02:  # HAZARD: dynamic-control-flow
            st["out"].copy_(frame)
            return
        bg = self._blur(frame)
        st["out"].copy_(st["ema"] * frame + (1 - st["ema"]) * bg)

    @torch.no_grad()
    def _capture(self, h, w):
        st = {
            "frame": torch.zeros(1, 3, h, w, device="cuda", dtype=torch.half),
            "ema": torch.zeros(1, 1, h, w, device="cuda", dtype=torch.half),
            "out": torch.zeros(1, 3, h, w, device="cuda", dtype=torch.half),
        }
        g = torch.cuda.CUDAGraph()
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            for _ in range(3):
                self._step(st)
            torch.cuda.synchronize()  # CLEAN: between warm-up and capture, not inside the graph
            g.capture_begin()  # HAZARD: stream
            self._step(st)
            g.capture_end()
        st["ema"].zero_()
        self.graphs[(h, w)] = (g, st)
        return g, st

    def process(self, frame_u8):
        h, w = frame_u8.shape[-2:]
        g, st = self.graphs.get((h, w)) or self._capture(h, w)
        st["frame"].copy_(frame_u8.to("cuda", non_blocking=True).half().div_(255))  # CLEAN: H2D copy outside the capture
        g.replay()
        return (st["out"].clamp(0, 1) * 255).byte()


def run(camera, pipeline):
    for i, frame in enumerate(camera):
        if i == 300:
            pipeline.set_blur_strength(4)
        yield pipeline.process(frame)


if __name__ == "__main__":
    pipe = BlurPipeline(MattingNet())
    cam = (torch.randint(0, 255, (1, 3, 720, 1280), dtype=torch.uint8).pin_memory() for _ in range(600))
    for out in run(cam, pipe):
        pass
