"""OBS Studio Python script: virtual green screen.

A worker thread pulls webcam frames from a queue, runs a matting net replayed from a CUDA
graph and pushes the RGBA frame to the output queue that the OBS source reads.
"""
import queue
import threading

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import obspython as obs
except ImportError:
    obs = None

H, W = 360, 640
frames_in: "queue.Queue[np.ndarray]" = queue.Queue(maxsize=2)
frames_out: "queue.Queue" = queue.Queue(maxsize=2)
PROPS = {"threshold": 0.5, "feather": 3}


class MattingNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 24, 3, 2, 1), nn.ReLU(), nn.Conv2d(24, 24, 3, 1, 1), nn.ReLU())
        self.dec = nn.Conv2d(24, 1, 3, padding=1)
        self.post = torch.cuda.Stream()

    def forward(self, x):
        alpha = torch.sigmoid(F.interpolate(self.dec(self.enc(x)), size=(H, W), mode="bilinear"))
        hard = (alpha > PROPS["threshold"]).float()  # HAZARD: python-scalar
        k = 2 * PROPS["feather"] + 1  # HAZARD: python-scalar
        soft = F.avg_pool2d(hard, k, stride=1, padding=k // 2)
        self.post.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.post):  # HAZARD: stream
            fg_mean = x[(soft > 0.5).expand_as(x)].mean()  # HAZARD: dynamic-shape
        return torch.cat([x, soft], 1), fg_mean


class Worker(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.net = MattingNet().cuda().eval()
        self.static_in = torch.zeros(1, 3, H, W, device="cuda")
        self.stage = torch.empty(H, W, 3, dtype=torch.uint8).pin_memory()  # CLEAN: pinned staging buffer
        self.stop = threading.Event()
        self.graph = None

    def _capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.no_grad():  # CLEAN: forked warm-up, joined below
            for _ in range(3):
                self.net(self.static_in)
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(self.graph):
            self.static_out, self.static_fg = self.net(self.static_in)

    def run(self):
        self._capture()
        while not self.stop.is_set():
            try:
                frame = frames_in.get(timeout=0.1)
            except queue.Empty:
                continue
            self.stage.copy_(torch.from_numpy(frame))
            gpu = self.stage.to("cuda", non_blocking=True)  # CLEAN: pinned upload, outside the capture
            self.static_in.copy_(gpu.permute(2, 0, 1)[None].float() / 255)  # CLEAN: copy_ into the static input
            self.graph.replay()
            frames_out.put(self.static_out)  # HAZARD: static-address


worker = None


def script_properties():
    props = obs.obs_properties_create()
    obs.obs_properties_add_float_slider(props, "threshold", "Threshold", 0.0, 1.0, 0.01)
    obs.obs_properties_add_int(props, "feather", "Feather", 0, 8, 1)
    return props


def script_update(settings):
    PROPS["threshold"] = obs.obs_data_get_double(settings, "threshold")
    PROPS["feather"] = obs.obs_data_get_int(settings, "feather")


def script_load(settings):
    global worker
    worker = Worker()
    worker.start()


def script_unload():
    if worker is not None:
        worker.stop.set()
