"""Hip exoskeleton controller: gait-phase estimator + assistance-torque head, graphed with
torch.cuda.make_graphed_callables and adapted online to the wearer.

The IMU thread pushes 200 Hz windows into a queue; every window the controller runs the
graphed encoder/head, commands torque, and every 50 windows takes one adaptation step on the
heel-strike labels detected by the foot-switch insoles. A clinician tablet can change the
assistance gain while the wearer walks.
"""
import queue
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

WIN = 64
CH = 12


class PhaseEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(CH, 128, batch_first=True)
        self.sensor_dropout_p = 0.1
        self.register_buffer("imu_only_mask", torch.tensor([1.0] * 6 + [0.0] * 6))

    def forward(self, imu):
        if random.random() < self.sensor_dropout_p:  # HAZARD: host-code
            imu = imu * self.imu_only_mask
        out, _ = self.gru(imu)
        return out[:, -1]


class TorqueHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.phase = nn.Linear(128, 2)
        self.torque = nn.Linear(128 + 2, 1)
        self.assist_gain = 0.35

    def forward(self, feat):
        ph = F.normalize(self.phase(feat), dim=-1)
        gain = self.assist_gain  # HAZARD: python-scalar
        tau = torch.tanh(self.torque(torch.cat([feat, ph], -1))) * gain
        return ph, tau


class ExoController:
    def __init__(self, dev="cuda"):
        self.enc, self.head = PhaseEncoder().to(dev), TorqueHead().to(dev)
        self.feats = []
        self.enc.register_forward_hook(lambda m, i, o: self.feats.append(o.detach()))  # HAZARD: api-misuse
        x = torch.randn(1, WIN, CH, device=dev)
        f = torch.randn(1, 128, device=dev, requires_grad=True)
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            self.g_enc, self.g_head = torch.cuda.make_graphed_callables(
                (self.enc, self.head), ((x,), (f,)))
        self.opt = torch.optim.AdamW(list(self.enc.parameters()) + list(self.head.parameters()), lr=1e-4)
        self.head.register_forward_hook(self._clip_torque)  # CLEAN: hook registered after graphing
        self.dev = dev
        self.buf = []

    def _clip_torque(self, mod, inp, out):
        return out

    def step(self, imu):
        ph, tau = self.g_head(self.g_enc(imu))
        return ph.detach(), tau.detach()

    def adapt(self, windows, phase_labels):
        x = torch.stack(windows).to(self.dev)
        for w, y in zip(x.split(1), phase_labels.split(1)):
            ph, _ = self.g_head(self.g_enc(w))
            loss = F.mse_loss(ph, y)
            self.opt.zero_grad(set_to_none=False)
            loss.backward()
            self.opt.step()  # CLEAN: eager optimizer step, outside the graphed callables
        for g in self.opt.param_groups:
            g["lr"] *= 0.98  # CLEAN: the optimizer is not captured or compiled

    def on_tablet(self, gain):
        self.head.assist_gain = float(gain)

    def evaluate(self, imu):
        self.enc.eval()
        with torch.no_grad():
            feat = self.enc(imu)  # CLEAN: eval mode differs from capture, the original forward runs
        self.enc.train()
        return feat


def control_loop(ctrl, imu_q, motor, labels_q):
    windows = []
    while True:
        imu = imu_q.get()
        ph, tau = ctrl.step(imu)
        motor.command(tau.cpu().item())
        windows.append(imu.squeeze(0).cpu())
        if len(windows) == 50:
            try:
                ctrl.adapt(windows, labels_q.get_nowait())
            except queue.Empty:
                pass
            windows.clear()
