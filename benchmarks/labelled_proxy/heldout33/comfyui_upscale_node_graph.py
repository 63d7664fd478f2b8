"""ComfyUI custom node: "Fast ESR Upscale (CUDA Graph)".

Drop into ComfyUI/custom_nodes/. The node keeps one captured graph per image size in a
module-level cache so repeated queue runs skip the Python overhead.
"""
import logging

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("fast_esr")

_MODEL = None
_GRAPHS = {}          # (h, w) -> (graph, static_in, static_out)
SETTINGS = {"sharpen": 0.35, "denoise": 0.1}


class TinyESR(nn.Module):
    def __init__(self, ch=32):
        super().__init__()
        self.head = nn.Conv2d(3, ch, 3, padding=1)
        self.body = nn.Sequential(*[nn.Conv2d(ch, ch, 3, padding=1) for _ in range(4)])
        self.tail = nn.Conv2d(ch, 3 * 4, 3, padding=1)

    def forward(self, x):
        h = F.leaky_relu(self.head(x), 0.2)
        h = h + self.body(h)
        up = F.pixel_shuffle(self.tail(h), 2)
        amount = SETTINGS["sharpen"]  # HAZARD: python-scalar
        blur = F.avg_pool2d(up, 3, stride=1, padding=1)
        k = torch.from_numpy(_denoise_kernel(SETTINGS["denoise"])).to("cuda")  # HAZARD: pinned-memory
        up = F.conv2d(up, k.half().expand(3, 1, 3, 3), padding=1, groups=3)
        dither = np.random.uniform(-0.5, 0.5) / 255.0  # HAZARD: host-code
        log.debug("esr forward done")  # CLEAN: plain string logged once inside the capture
        return (up + amount * (up - blur) + dither).clamp(0, 1)


def _denoise_kernel(strength):
    k = np.full((3, 3), strength / 8.0, dtype=np.float32)
    k[1, 1] = 1.0 - strength
    return k


def _get_model():
    global _MODEL
    if _MODEL is None:
        _MODEL = TinyESR().cuda().eval().half()
    return _MODEL


def _capture(h, w):
    model = _get_model()
    static_in = torch.zeros(1, 3, h, w, device="cuda", dtype=torch.half)
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g):  # HAZARD: api-misuse
        static_out = model(static_in)
    return g, static_in, static_out


class FastESRUpscale:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",),
                             "sharpen": ("FLOAT", {"default": 0.35, "min": 0.0, "max": 1.0}),
                             "gamma": ("FLOAT", {"default": 1.0, "min": 0.5, "max": 2.0})}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "upscale"
    CATEGORY = "image/upscaling"

    def upscale(self, image, sharpen, gamma):
        SETTINGS["sharpen"] = sharpen
        b, h, w, c = image.shape
        key = (h, w)
        if key not in _GRAPHS:
            _GRAPHS[key] = _capture(h, w)
            log.info("captured upscale graph for %dx%d", w, h)
        g, static_in, static_out = _GRAPHS[key]
        outs = []
        for i in range(b):
            frame = image[i].permute(2, 0, 1).unsqueeze(0)
            frame = frame.to("cuda", dtype=torch.half) ** gamma  # CLEAN: eager upload and gamma before replay
            static_in.copy_(frame)  # CLEAN: copy_ into the static input
            g.replay()
            outs.append(static_out.float().cpu())  # CLEAN: .cpu() makes a new host tensor per frame
        result = torch.cat(outs).permute(0, 2, 3, 1)
        return (result,)


class FastESRPreview:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "preview"
    CATEGORY = "image/upscaling"

    def preview(self, image):
        x = image.permute(0, 3, 1, 2).cuda().half()
        with torch.no_grad():
            y = _get_model()(x)
        peak = float(y.max())  # CLEAN: eager host read
        return ((y / max(peak, 1e-6)).float().cpu().permute(0, 2, 3, 1),)


NODE_CLASS_MAPPINGS = {"FastESRUpscale": FastESRUpscale, "FastESRPreview": FastESRPreview}
NODE_DISPLAY_NAME_MAPPINGS = {"FastESRUpscale": "Fast ESR Upscale (CUDA Graph)"}
