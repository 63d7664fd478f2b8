"""Learned inverse kinematics for a 7-DoF arm, trained through a differentiable FK layer.

The IK network maps a target end-effector pose and a seed configuration to joint angles; the
forward-kinematics layer (Denavit-Hartenberg chain) turns them back into a pose, so the loss
is a pose error. Both modules are graphed together with torch make_graphed_callables.
"""
import numpy as np
import torch
import torch.nn as nn

N_J = 7
JOINT_LIMITS = [(-2.9, 2.9), (-1.76, 1.76), (-2.9, 2.9), (-3.07, -0.07), (-2.9, 2.9), (-0.02, 3.75), (-2.9, 2.9)]
DH = np.array([[0.333, 0, 0], [0, 0, -np.pi / 2], [0.316, 0, np.pi / 2], [0, 0.0825, np.pi / 2],
               [0.384, -0.0825, -np.pi / 2], [0, 0, np.pi / 2], [0.107, 0.088, np.pi / 2]], dtype=np.float32)


class IKNet(nn.Module):
    def __init__(self, hidden=512):
        super().__init__()
        self.joint_limits = JOINT_LIMITS
        self.register_buffer("q_lo", torch.tensor([lo for lo, _ in JOINT_LIMITS]))
        self.register_buffer("q_hi", torch.tensor([hi for _, hi in JOINT_LIMITS]))
        self.net = nn.Sequential(nn.Linear(7 + N_J, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                 nn.Linear(hidden, N_J))

    def forward(self, pose, q_seed):
        q = q_seed + self.net(torch.cat([pose, q_seed], dim=-1))
        if torch.isnan(q).any():  # HAZARD: dynamic-control-flow
            q = torch.nan_to_num(q, nan=0.0)
        limits = torch.tensor(self.joint_limits, device=q.device)  # HAZARD: host-sync
        q = torch.maximum(torch.minimum(q, limits[:, 1]), limits[:, 0])
        return torch.clamp(q, self.q_lo, self.q_hi)  # CLEAN: tensor bounds from registered buffers


class FKLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.dh_np = DH
        self.scale = nn.Parameter(torch.ones(1))          # link-length calibration factor

    def forward(self, q):
        dh = torch.from_numpy(self.dh_np).cuda()  # HAZARD: pinned-memory
        d, a, alpha = dh[:, 0] * self.scale, dh[:, 1] * self.scale, dh[:, 2]
        T = torch.eye(4, device=q.device).expand(q.shape[0], 4, 4)
        for i in range(N_J):
            ct, st = torch.cos(q[:, i]), torch.sin(q[:, i])
            ca, sa = torch.cos(alpha[i]).expand_as(ct), torch.sin(alpha[i]).expand_as(ct)
            zero, one = torch.zeros_like(ct), torch.ones_like(ct)
            A = torch.stack([
                torch.stack([ct, -st, zero, a[i].expand_as(ct)], -1),
                torch.stack([st * ca, ct * ca, -sa, -sa * d[i]], -1),
                torch.stack([st * sa, ct * sa, ca, ca * d[i]], -1),
                torch.stack([zero, zero, zero, one], -1)], -2)
            T = T @ A
        return torch.cat([T[:, :3, 3], T[:, :3, :3].flatten(1)[:, :4]], dim=-1)


@torch.autocast("cuda", dtype=torch.bfloat16)  # HAZARD: autocast-cache
def build_graphed(ik, fk, batch=4096):
    pose = torch.randn(batch, 7, device="cuda")
    seed = torch.randn(batch, N_J, device="cuda")
    q = torch.randn(batch, N_J, device="cuda", requires_grad=True)
    return torch.cuda.make_graphed_callables((ik, fk), ((pose, seed), (q,)))


def train(steps=20000, batch=4096):
    ik, fk = IKNet().cuda(), FKLayer().cuda()
    fk_nominal = FKLayer().cuda().requires_grad_(False)       # nominal kinematics for targets
    g_ik, g_fk = build_graphed(ik, fk, batch)
    opt = torch.optim.Adam(list(ik.parameters()) + list(fk.parameters()), lr=3e-4)
    lo, hi = ik.q_lo, ik.q_hi
    for step in range(steps):
        q_true = lo + (hi - lo) * torch.rand(batch, N_J, device="cuda")
        with torch.no_grad():
            target = fk_nominal(q_true)  # CLEAN: ungraphed reference module, outside any capture
        seed = (q_true + 0.3 * torch.randn_like(q_true)).clamp(lo, hi)
        q_pred = g_ik(target, seed)  # CLEAN: positional tensors, same order as sample_args
        loss = (g_fk(q_pred) - target).pow(2).sum(-1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 1000 == 0:
            print(step, loss.item())


if __name__ == "__main__":
    train()
