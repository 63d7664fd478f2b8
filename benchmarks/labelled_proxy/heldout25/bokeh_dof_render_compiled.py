"""Neural depth-of-field ("portrait bokeh") for the camera app's live viewfinder.

A monocular depth net gives disparity; a circle-of-confusion map is computed from the
tap-to-focus depth and the virtual f-stop (a dial in the UI, f/1.4 ... f/16), then a
learned layered blur renders the bokeh. Compiled with the dynamo "cudagraphs" backend.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

LEVELS = 6


class LayeredBlur(nn.Module):
    def __init__(self):
        super().__init__()
        self.refine = nn.Sequential(nn.Conv2d(3 * LEVELS + 1, 32, 3, padding=1), nn.ReLU(),
                                    nn.Conv2d(32, LEVELS, 3, padding=1))

    def forward(self, img, coc):
        pyr = [img] + [F.avg_pool2d(img, 2 * k + 1, 1, k) for k in range(1, LEVELS)]
        stack = torch.cat(pyr + [coc], 1)
        w = torch.softmax(self.refine(stack), 1)
        return sum(w[:, i:i + 1] * p for i, p in enumerate(pyr))


class BokehRenderer:
    def __init__(self, depth_net, blur, max_radius=12.0, focal_mm=26.0):
        self.depth_net = depth_net.cuda().eval()
        self.blur = blur.cuda().eval()
        self.max_radius = max_radius
        self.focal_mm = focal_mm
        self.fstop = 2.8
        self.focus_uv = torch.tensor([0.5, 0.5], device="cuda")
        self.frame_times = []
        self.render = torch.compile(self._render, backend="cudagraphs")

    def tap_to_focus(self, u, v):
        self.focus_uv.copy_(torch.tensor([u, v]))  # CLEAN: eager copy into a device tensor read by the graph

    @torch.no_grad()
    def _render(self, frame):
        self.frame_times.append(time.time())  # HAZARD: host-code
        disp = self.depth_net(frame)
        h, w = disp.shape[-2:]
        grid = (self.focus_uv * 2 - 1).view(1, 1, 1, 2)
        focus = F.grid_sample(disp, grid, align_corners=False).view(-1, 1, 1, 1)  # CLEAN: focus disparity sampled on device
        ref = disp.median().item()  # HAZARD: host-sync
        aperture = self.focal_mm / self.fstop  # HAZARD: python-scalar
        coc = (disp - focus).abs() * aperture * (1.0 + 0.1 * ref)
        if coc.max() > self.max_radius:  # HAZARD: dynamic-control-flow
            coc = coc * (self.max_radius / coc.max())
        coc = torch.clamp(coc / self.max_radius, 0.0, 1.0)  # CLEAN: device-side clamp with a fixed bound
        return self.blur(frame, coc), coc

    def viewfinder(self, camera, ui):
        for frame in camera.frames():           # fixed 720p preview stream
            self.fstop = ui.fstop_dial()
            out, coc = self.render(frame.cuda(non_blocking=True))
            yield out.clamp(0, 1).mul(255).byte().cpu()  # CLEAN: eager readback after the call


def still_capture(renderer, raw):
    full = torch.compile(renderer._render)       # default inductor, no CUDA graphs
    out, coc = full(raw.cuda())  # CLEAN: default compile for the 12 MP still
    return out.cpu(), float(coc.mean())
