"""500 Hz locomotion policy for a quadruped, replayed as a CUDA graph from the motor-bus loop.

The motor-bus thread calls ``PolicyRunner.tick`` every 2 ms. A watchdog thread drops the robot
into damping mode when a tick is late, and a watcher thread hot-reloads the gains file while
the robot walks (the tuning engineer edits it on a laptop next to the treadmill).
"""
import threading
import time

import numpy as np
import torch
import torch.nn as nn
import yaml

DT = 0.002
HIST = 6
OBS = 48
ACT = 12
N_HEIGHTS = 187


class GaitPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(OBS * HIST + N_HEIGHTS, 512), nn.ELU(),
                                 nn.Linear(512, 256), nn.ELU(), nn.Linear(256, ACT))

    def forward(self, hist, heights):
        return self.net(torch.cat([hist.flatten(1), heights], dim=1))


class PolicyRunner:
    def __init__(self, policy, cfg_path, device="cuda"):
        self.dev = torch.device(device)
        self.policy = policy.to(self.dev).eval()
        self.cfg = yaml.safe_load(open(cfg_path))
        self.static_obs = torch.zeros(1, OBS, device=self.dev)
        self.static_hist = torch.zeros(1, HIST, OBS, device=self.dev)
        # written in place by the elevation-mapping thread
        self.height_map = np.zeros((1, N_HEIGHTS), dtype=np.float32)
        self.default_pose = torch.tensor(self.cfg["default_pose"], device=self.dev)  # CLEAN: built once in __init__, outside any capture
        self.phase = torch.zeros(1, device=self.dev)
        self.last_tick = time.monotonic()
        self.graph = None
        self.target = None

    def _step(self):
        self.static_hist.copy_(torch.roll(self.static_hist, -1, dims=1))
        self.static_hist[:, -1].copy_(self.static_obs)
        heights = torch.as_tensor(self.height_map, device=self.dev)  # HAZARD: pinned-memory
        raw = self.policy(self.static_hist, heights)
        action_scale = self.cfg["action_scale"]  # HAZARD: python-scalar
        self.phase.add_(DT * 2.0).remainder_(1.0)  # CLEAN: device-side gait clock with a constant increment
        if (self.static_obs[:, 2] < 0.18).any():  # HAZARD: dynamic-control-flow
            raw = torch.zeros_like(raw)
        stance = torch.where(torch.sin(2 * np.pi * self.phase) > 0, 1.0, 0.6)  # CLEAN: device-side select
        self.last_tick = time.monotonic()  # HAZARD: host-code
        self.target = self.default_pose + action_scale * raw * stance
        return self.target

    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(self.graph):
            self._step()

    def tick(self, obs_np):
        self.static_obs.copy_(torch.from_numpy(obs_np).to(self.dev))
        self.graph.replay()
        return self.target.cpu().numpy()  # CLEAN: read back after the replay, outside the region

    def reset_after_fall(self):
        self.static_hist = torch.zeros(1, HIST, OBS, device=self.dev)  # HAZARD: static-address
        self.phase.zero_()  # CLEAN: in-place reset keeps the captured address


def watch_config(runner, path, stop):
    while not stop.is_set():
        runner.cfg = yaml.safe_load(open(path))
        time.sleep(0.5)


def watchdog(runner, stop, on_late):
    while not stop.is_set():
        if time.monotonic() - runner.last_tick > 4 * DT:  # CLEAN: watchdog thread, outside any capture
            on_late()
        time.sleep(DT)


def main(bus, cfg_path="gains.yaml"):
    runner = PolicyRunner(GaitPolicy(), cfg_path)
    runner.capture()
    stop = threading.Event()
    threading.Thread(target=watch_config, args=(runner, cfg_path, stop), daemon=True).start()
    threading.Thread(target=watchdog, args=(runner, stop, bus.damping_mode), daemon=True).start()
    while bus.alive():
        obs = bus.read_state()
        if bus.fallen():
            runner.reset_after_fall()
            continue
        bus.write_targets(runner.tick(obs))
    stop.set()
