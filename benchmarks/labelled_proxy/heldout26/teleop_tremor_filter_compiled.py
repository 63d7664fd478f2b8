"""Master-slave surgical teleoperation: learned tremor canceller + motion scaling at 1 kHz.

The haptic device thread delivers master-arm poses; the filter predicts the voluntary
component, scales it and sends an incremental command to the slave arm. A foot pedal
(clutch) and a scaling knob change the scale while the surgeon operates. The filter is
compiled with mode="reduce-overhead"; an offline replay tool uses the same module without
CUDA graphs.
"""
import logging
import threading
import time

import torch
import torch.nn as nn

log = logging.getLogger("teleop")
WIN = 32


class TremorFilter(nn.Module):
    def __init__(self):
        super().__init__()
        self.tcn = nn.Sequential(nn.Conv1d(6, 64, 5, padding=4, dilation=2), nn.GELU(),
                                 nn.Conv1d(64, 64, 5, padding=8, dilation=4), nn.GELU(),
                                 nn.Conv1d(64, 6, 1))
        self.motion_scale = 0.4
        self.register_buffer("last_cmd", torch.zeros(1, 6))

    def forward(self, window):
        voluntary = self.tcn(window)[..., -window.shape[-1]:]
        delta = voluntary[..., -1] - voluntary[..., -2]
        scale = self.motion_scale  # HAZARD: python-scalar
        if delta.abs().max() > 0.01:  # HAZARD: dynamic-control-flow
            delta = delta * 0.5
        tremor = (window - voluntary).pow(2).mean()
        log.debug("tremor band power %s", tremor)  # HAZARD: host-code
        cmd = self.last_cmd + scale * delta
        self.last_cmd.copy_(cmd)  # CLEAN: mutation of a registered buffer (static input)
        return cmd


class TeleopLoop:
    def __init__(self, dev="cuda"):
        self.filt = TremorFilter().to(dev).eval()
        self.fast = torch.compile(self.filt, mode="reduce-overhead")
        self.window = torch.zeros(1, 6, WIN, device=dev)
        self.history = []
        self.knob_scale = 0.4
        self.lock = threading.Lock()
        self.dev = dev

    def on_master_pose(self, pose6):
        with self.lock:
            self.window = torch.roll(self.window, -1, dims=-1)
            self.window[..., -1] = pose6.to(self.dev)
        t0 = time.perf_counter()  # CLEAN: timing in the eager loop, outside the compiled forward
        with torch.no_grad():
            cmd = self.fast(self.window)
        self.history.append(cmd)  # HAZARD: static-address
        if time.perf_counter() - t0 > 0.0008:
            log.warning("filter over budget, holding last command")  # CLEAN: eager logging outside the region
            return None
        return cmd.clone()  # CLEAN: clone before the next call reuses the output memory

    def on_clutch(self, pressed):
        self.filt.motion_scale = 0.0 if pressed else self.knob_scale

    def on_knob(self, value):
        self.knob_scale = 0.2 + 0.6 * value
        self.filt.motion_scale = self.knob_scale


def offline_replay(recording, dev="cuda"):
    filt = TremorFilter().to(dev).eval()
    slow = torch.compile(filt, mode="max-autotune-no-cudagraphs")
    outs = []
    with torch.no_grad():
        for i, window in enumerate(recording):
            filt.motion_scale = 0.2 + 0.02 * (i % 10)
            outs.append(slow(window.to(dev)))  # CLEAN: no CUDA graphs in this mode
    return torch.cat(outs)


def haptic_thread(loop, device, stop):
    while not stop.is_set():
        pose = device.read_pose()
        cmd = loop.on_master_pose(pose)
        if cmd is not None:
            device.send_slave(cmd.cpu())
