"""Per-camera letterbox preprocessing for a multi-camera detector ingest service.

Each camera gets a preprocessing closure compiled with reduce-overhead; the closures
are built by a factory and run on the camera's own stream.  Frames arrive as uint8
HWC tensors already on the GPU (decoded by NVDEC); how many frames a camera
batch holds depends on what arrived since the last tick.
"""
import logging

import torch
import torch.nn.functional as F

log = logging.getLogger("ingest")
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


def make_letterbox(target=640, pad_value=114.0, mode="reduce-overhead"):
    mean = MEAN.cuda() * 255
    std = STD.cuda() * 255
    state = {"exposure": 1.0, "frames": 0}

    def letterbox(frames):
        x = frames.permute(0, 3, 1, 2).float()
        h, w = x.shape[-2:]
        r = target / max(h, w)
        nh, nw = int(round(h * r)), int(round(w * r))  # CLEAN: shape arithmetic on Python ints
        x = F.interpolate(x, size=(nh, nw), mode="bilinear", align_corners=False)
        x = x * state["exposure"]  # HAZARD: python-scalar
        pad_h, pad_w = target - nh, target - nw
        x = F.pad(x, (pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2), value=pad_value)
        return (x - mean) / std

    def letterbox_checked(frames):
        out = letterbox(frames)
        if out.isnan().any():  # HAZARD: dynamic-control-flow
            out = torch.nan_to_num(out)
        log.debug("camera batch %s", tuple(out.shape))  # HAZARD: host-code
        return out

    def set_exposure(gain):
        state["exposure"] = gain

    fn = torch.compile(letterbox_checked, mode=mode)
    return fn, set_exposure


class CameraHub:
    def __init__(self, detector, camera_ids, target=640):
        self.detector = torch.compile(detector.cuda().eval(), mode="max-autotune-no-cudagraphs")
        self.cams = {}
        for cid in camera_ids:
            fn, set_exp = make_letterbox(target)
            self.cams[cid] = dict(pre=fn, set_exposure=set_exp, stream=torch.cuda.Stream())
        self.audit = torch.compile(self._audit, mode="max-autotune-no-cudagraphs")

    def _audit(self, x):
        log.info("audit %s", x.mean())  # CLEAN: no CUDA graphs in this compile
        return x[x > 0].numel()  # CLEAN: no CUDA graphs in this compile

    @torch.no_grad()
    def process(self, batches: dict):
        outs = {}
        for cid, frames in batches.items():
            cam = self.cams[cid]
            cam["stream"].wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(cam["stream"]):
                x = cam["pre"](frames)  # HAZARD: dynamic-shape
                outs[cid] = self.detector(x)
        for cid in outs:
            torch.cuda.current_stream().wait_stream(self.cams[cid]["stream"])
        return outs

    @torch.no_grad()
    def process_fixed(self, cid, frames, keep):
        x = self.cams[cid]["pre"](frames)
        keep.append(x.clone())  # CLEAN: cloned before the next call
        return self.detector(x)

    def on_auto_exposure(self, cid, luma_mean: float):
        self.cams[cid]["set_exposure"](min(2.0, max(0.5, 110.0 / max(luma_mean, 1.0))))
