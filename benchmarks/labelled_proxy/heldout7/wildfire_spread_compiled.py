"""Learned wildfire-spread emulator (30 m grid, 1-minute steps) for incident planning.

A CNN transition model advances (unburnt fuel, burning, burnt) fractions given terrain
and the hourly wind forecast. Compile settings come from dataclass configs: the
operational rollout uses Inductor CUDA graphs, the quick-look preview does not.
"""
import logging
import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn

log = logging.getLogger("fire")


@dataclass
class CompileConfig:
    options: dict = field(default_factory=lambda: {"triton.cudagraphs": True})
    dynamic: bool = False

    def apply(self, fn):
        return torch.compile(fn, options=self.options, dynamic=self.dynamic)


@dataclass
class SimConfig:
    steps_per_hour: int = 60
    hours: int = 12
    run: CompileConfig = field(default_factory=CompileConfig)
    preview: CompileConfig = field(default_factory=lambda: CompileConfig(options={"triton.cudagraphs": False}))


class SpreadCNN(nn.Module):
    def __init__(self, c_terrain=4, w=48):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3 + c_terrain + 2, w, 3, padding=1), nn.GELU(),
                                 nn.Conv2d(w, w, 3, padding=2, dilation=2), nn.GELU(),
                                 nn.Conv2d(w, 3, 1))

    def forward(self, state, terrain, wind_uv):
        wind = wind_uv.view(1, 2, 1, 1).expand(state.shape[0], -1, *state.shape[-2:])
        delta = self.net(torch.cat([state, terrain, wind], 1))
        return torch.softmax(torch.log(state.clamp_min(1e-6)) + delta, dim=1)


def make_step(model):
    def step(state, terrain, wind_dir_uv, wind_speed):
        burning = state[:, 1]
        if burning.sum() == 0:  # HAZARD: dynamic-control-flow
            return state
        uv = wind_dir_uv * (wind_speed / 10.0)  # HAZARD: python-scalar
        log.info("fire step, wind %.1f m/s", wind_speed)  # HAZARD: host-code
        return model(state, terrain, uv)
    return step


def make_tensor_wind_step(model):
    def step(state, terrain, wind_uv):
        return model(state, terrain, wind_uv * 0.1)  # CLEAN: wind passed as a device tensor, not a Python float
    return step


@torch.no_grad()
def run_incident(model, ignition, terrain, wind_forecast, cfg=SimConfig()):
    model = model.eval().cuda()
    step = cfg.run.apply(make_step(model))
    state, history = ignition.cuda(), []
    for hour in range(cfg.hours):
        speed, direction = wind_forecast[hour]                     # Python floats from the forecast API
        theta = math.radians(direction)
        dir_uv = torch.tensor([math.sin(theta), math.cos(theta)], device="cuda")  # CLEAN: built eagerly, outside the compiled step
        for _ in range(cfg.steps_per_hour):
            nxt = step(state, terrain, dir_uv, speed)
            history.append(nxt)  # HAZARD: static-address
            state = nxt.clone()
    return history


@torch.no_grad()
def run_ensemble(model, ignition, terrain, wind_uv_members, cfg=SimConfig()):
    model = model.eval().cuda()
    step = cfg.run.apply(make_tensor_wind_step(model))
    wind = torch.zeros(2, device="cuda")
    finals = []
    for member_uv in wind_uv_members:                              # (hours, 2) tensors
        state = ignition.cuda()
        for hour in range(cfg.hours):
            wind.copy_(member_uv[hour])
            for _ in range(cfg.steps_per_hour):
                state = step(state, terrain, wind).clone()  # CLEAN: output cloned before it is fed back
        finals.append(state)  # CLEAN: an eager clone, not a graph-owned output
    return torch.stack(finals).mean(0)


@torch.no_grad()
def preview(model, ignition, terrain, wind_uv, cfg=SimConfig()):
    step = cfg.preview.apply(make_tensor_wind_step(model.eval().cuda()))
    state, frames = ignition.cuda(), []
    for _ in range(cfg.hours):
        state = step(state, terrain, wind_uv.cuda())
        frames.append(state)  # CLEAN: preview config has CUDA graphs off, outputs are not reused
    return frames
