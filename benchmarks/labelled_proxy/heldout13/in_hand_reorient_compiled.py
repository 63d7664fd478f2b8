"""Dexterous in-hand cube reorientation with a 16-DoF hand. The deployed student
policy (proprioception + fingertip forces + cube pose estimate + goal) runs at
30 Hz as a compiled lambda with mode="reduce-overhead"; the privileged teacher
used for DAgger relabelling is compiled without CUDA graphs.
"""
import time

import torch
import torch.nn as nn

DOF, N_TIPS = 16, 4
OBS_DIM = 2 * DOF + 3 * N_TIPS + 7 + 4 + N_TIPS


class Policy(nn.Module):
    def __init__(self, obs_dim=OBS_DIM, act_dim=DOF):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(obs_dim, 512), nn.ELU(), nn.Linear(512, 256), nn.ELU(),
                                 nn.Linear(256, act_dim))

    def forward(self, obs):
        return torch.tanh(self.mlp(obs))


student, teacher = Policy().cuda(), Policy().cuda().eval()


def build_obs(q, qd, tip_force, cube_pose, goal_quat):
    contact = (tip_force.norm(dim=-1) > 0.2).float()  # CLEAN: comparison cast to float, no data-dependent shape
    return torch.cat([q, qd, tip_force.flatten(1), cube_pose, goal_quat, contact], -1)


def _act(q, qd, f, pose, goal):
    stamp = time.time()  # HAZARD: host-code
    obs = build_obs(q, qd, f, pose, goal)
    touching = torch.nonzero(f[0].norm(dim=-1) > 0.2)  # HAZARD: dynamic-shape
    return student(obs), touching, stamp


act = torch.compile(lambda q, qd, f, pose, goal: _act(q, qd, f, pose, goal), mode="reduce-overhead")
relabel = torch.compile(lambda obs: teacher(obs), mode="max-autotune-no-cudagraphs")


@torch.no_grad()
def rollout(read_sensors, steps=300):
    actions = []
    for _ in range(steps):
        a, _, _ = act(*read_sensors())
        actions.append(a)  # HAZARD: static-address
    return actions


@torch.no_grad()
def rollout_logged(read_sensors, steps=300):
    log = []
    for _ in range(steps):
        a, _, _ = act(*read_sensors())
        log.append(a.clone())  # CLEAN: cloned before the next replay
    return log


def dagger(obs_batches, lr=3e-4):
    opt = torch.optim.Adam(student.parameters(), lr=lr)
    opt_step = torch.compile(opt.step, mode="reduce-overhead")
    for it, obs in enumerate(obs_batches):
        with torch.no_grad():
            target = relabel(obs)  # CLEAN: teacher compiled without CUDA graphs
        loss = (student(obs) - target).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt_step()
        if it == 500:
            opt.param_groups[0]["lr"] = lr / 3  # HAZARD: optimizer


def fake_sensors(B=1, device="cuda"):
    q = torch.randn(B, DOF, device=device) * 0.3
    pose = torch.cat([torch.randn(B, 3, device=device) * 0.01, torch.nn.functional.normalize(torch.randn(B, 4, device=device), dim=-1)], -1)
    goal = torch.nn.functional.normalize(torch.randn(B, 4, device=device), dim=-1)
    return q, torch.zeros_like(q), torch.rand(B, N_TIPS, 3, device=device) * 0.5, pose, goal


if __name__ == "__main__":
    acts = rollout(fake_sensors)
    logged = rollout_logged(fake_sensors)
    obs = [build_obs(*fake_sensors(B=256)) for _ in range(800)]
    dagger(obs)
    print(len(acts), torch.stack(logged).abs().mean().item())
