"""Image-based visual servoing for a 7-DoF arm picking parcels off a conveyor.

A wrist camera streams at 60 Hz; a keypoint network finds the grasp features, and the
servo law turns the feature error into joint velocities through the learned interaction
matrix. The per-frame servo step is compiled with mode="reduce-overhead" and runs in the
control thread; a ROS-style timer stops the arm when two frames in a row are late.
"""
import threading
import time

import torch
import torch.nn as nn

DOF, KP = 7, 4


class ServoNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.kp = nn.Sequential(nn.Conv2d(3, 32, 5, 2, 2), nn.ReLU(), nn.Conv2d(32, KP, 3, 2, 1))
        self.jac = nn.Sequential(nn.Linear(2 * KP + DOF, 128), nn.Tanh(), nn.Linear(128, 2 * KP * DOF))
        self.register_buffer("goal", torch.zeros(1, 2 * KP))
        self.register_buffer("q_cmd", torch.zeros(1, DOF))
        self.gain = 0.8
        self.tol = 2.0

    def features(self, img):
        heat = self.kp(img).flatten(2).softmax(-1)
        w = img.shape[-1] // 4
        idx = torch.arange(heat.shape[-1], device=img.device)
        return torch.cat([(heat * (idx % w)).sum(-1), (heat * (idx // w)).sum(-1)], -1)

    def forward(self, img, joint_state):
        s = self.features(img)
        err = s - self.goal
        if err.norm() < self.tol:  # HAZARD: dynamic-control-flow
            return torch.zeros_like(joint_state), err
        L = self.jac(torch.cat([s, joint_state], -1)).view(-1, 2 * KP, DOF)
        dq = -self.gain * L.transpose(1, 2) @ err.unsqueeze(-1)  # CLEAN: gain fixed at start-up, never changed
        dq = dq.squeeze(-1).clamp(-0.5, 0.5)
        joint_state.add_(dq * (1.0 / 60.0))  # HAZARD: static-address
        self.q_cmd.copy_(joint_state)  # CLEAN: mutation of a registered buffer
        self.residual = float(err.abs().max())  # HAZARD: host-sync
        return dq, err


class ServoController:
    def __init__(self, arm, dev="cuda"):
        self.arm, self.dev = arm, dev
        self.model = ServoNet().to(dev).eval()
        self.step = torch.compile(self.model, mode="reduce-overhead")
        self.late = 0
        self.last = time.monotonic()
        self.lock = threading.Lock()

    def set_goal(self, goal_px):
        self.model.goal.copy_(goal_px)

    @torch.no_grad()
    def on_frame(self, img_u8, q_now):
        img = img_u8.to(self.dev, non_blocking=True).permute(2, 0, 1)[None].float() / 255
        q = q_now.to(self.dev)
        dq, err = self.step(img, q)
        dq = dq.cpu().numpy()[0]  # CLEAN: host read-back after the compiled call
        with self.lock:
            self.last = time.monotonic()
        self.arm.joint_velocity(dq)
        return dq

    def watchdog(self, stop, period=1 / 60):
        while not stop.is_set():
            with self.lock:
                late = time.monotonic() - self.last > period
            self.late = self.late + 1 if late else 0
            if self.late >= 2:
                self.arm.stop()
            time.sleep(period)


def run(arm, camera):
    ctl = ServoController(arm)
    stop = threading.Event()
    threading.Thread(target=ctl.watchdog, args=(stop,), daemon=True).start()
    for img, q in camera.frames():
        ctl.on_frame(img, q)
    stop.set()
