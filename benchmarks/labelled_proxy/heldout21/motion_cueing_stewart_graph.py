"""Motion cueing for a 6-DoF driving simulator: a learned cueing policy (distilled from the
MPC washout filter) maps the vehicle's recent specific forces and angular rates to a
platform pose, and Stewart-platform inverse kinematics turns it into six actuator lengths.
One CUDA-graph replay per 1 kHz tick; the graph is rebuilt when the operator switches the
vehicle profile (car / truck), because the joint geometry differs per cabin mock-up.
"""
import logging

import numpy as np
import torch
import torch.nn as nn

log = logging.getLogger("cueing")


def rot(rpy):
    r, p, y = rpy.unbind(-1)
    cr, sr, cp, sp, cy, sy = r.cos(), r.sin(), p.cos(), p.sin(), y.cos(), y.sin()
    return torch.stack([
        torch.stack([cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr], -1),
        torch.stack([sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr], -1),
        torch.stack([-sp, cp * sr, cp * cr], -1)], -2)


class CueingPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(6, 128, batch_first=True)
        self.out = nn.Linear(128, 6)

    def forward(self, motion_hist, h):
        y, h = self.gru(motion_hist, h)
        pose = self.out(y[:, -1])
        return torch.cat([0.25 * torch.tanh(pose[:, :3]), 0.35 * torch.tanh(pose[:, 3:])], -1), h


class CueingLoop:
    def __init__(self, policy, profile, device="cuda"):
        self.policy = policy.to(device).eval()
        self.dev, self.profile = device, profile           # profile["joints"]: (12, 3) float64 ndarray
        self.motion = torch.zeros(1, 50, 6, device=device)
        self.h = torch.zeros(1, 1, 128, device=device)
        self.legs = torch.zeros(6, device=device)
        self.min_len = torch.tensor(1.10, device=device)
        self.max_len = torch.tensor(1.75, device=device)
        self.graph = torch.cuda.CUDAGraph()
        self.stream = torch.cuda.Stream()

    def _tick(self):
        pose, h = self.policy(self.motion, self.h)
        self.h.copy_(h)
        joints = torch.as_tensor(self.profile["joints"], device=self.dev, dtype=torch.float32)  # HAZARD: pinned-memory
        base, plat = joints[:6], joints[6:]
        R = rot(pose[0, 3:])
        legs = (pose[0, :3] + plat @ R.T - base).norm(dim=-1)
        if ((legs < self.min_len) | (legs > self.max_len)).any():  # HAZARD: dynamic-control-flow
            log.warning("workspace limit hit, clamping actuator lengths")
        self.legs.copy_(torch.clamp(legs, self.min_len, self.max_len))  # CLEAN: clamp with tensor bounds
        log.debug(f"longest leg {legs.max():.4f} m")  # HAZARD: host-sync

    @torch.no_grad()
    def capture(self):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            for _ in range(5):
                self._tick()
        torch.cuda.current_stream().wait_stream(self.stream)
        self.h.zero_()
        with torch.cuda.graph(self.graph, stream=self.stream):  # HAZARD: api-misuse
            log.info("capturing cueing graph")  # CLEAN: plain string, nothing read from the device
            self._tick()

    def switch_vehicle(self, profile):
        self.profile = profile
        self.capture()

    @torch.no_grad()
    def run(self, vehicle, platform, ticks):
        staging = torch.empty(1, 50, 6).pin_memory()
        for _ in range(ticks):
            staging.copy_(torch.from_numpy(vehicle.motion_history()))
            self.motion.copy_(staging, non_blocking=True)  # CLEAN: pinned staging buffer, copied outside the graph
            self.graph.replay()
            platform.command(self.legs.cpu().numpy())  # CLEAN: host read after the replay


if __name__ == "__main__":
    from simulator_io import MotionPlatform, VehicleModel, load_profile

    policy = CueingPolicy()
    policy.load_state_dict(torch.load("cueing_gru_mpc.pt", weights_only=True))
    car, truck = load_profile("profiles/compact_car.yaml"), load_profile("profiles/truck_cab.yaml")
    loop = CueingLoop(policy, car)
    loop.capture()
    platform = MotionPlatform("192.168.10.20")
    loop.run(VehicleModel("compact_car"), platform, ticks=600_000)
    loop.switch_vehicle(truck)
    loop.run(VehicleModel("truck_40t"), platform, ticks=600_000)
    np.save("last_legs.npy", loop.legs.cpu().numpy())
