# Blog post: "Speed up your Euler-Maruyama sampler 5x with one decorator".
# The post compiles the update step with mode="max-autotune" (which turns CUDA
# graphs on as well) and keeps the whole trajectory for plotting. Its sampler
# is below, followed by the version from the comments section.
import logging
import math

import torch
import torch.nn as nn

log = logging.getLogger(__name__)


class ScoreNet(nn.Module):
    def __init__(self, d=2, h=256):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d + 1, h), nn.SiLU(), nn.Linear(h, h), nn.SiLU(), nn.Linear(h, d))

    def forward(self, x, t):
        return self.net(torch.cat([x, t.expand(x.shape[0], 1)], dim=1))


@torch.compile(mode="max-autotune")
def em_step(net, x, t, dt, noise):
    drift = -0.5 * x - net(x, t)
    x_next = x + drift * dt + math.sqrt(dt) * noise  # HAZARD: python-scalar
    if torch.isnan(x_next).any():  # HAZARD: dynamic-control-flow
        x_next = torch.nan_to_num(x_next)
    log.info("t=%s |x|=%s", t, x_next.norm())  # HAZARD: host-code
    return x_next


@torch.no_grad()
def sample(net, n=4096, steps=100):
    x = torch.randn(n, 2, device="cuda")
    ts = torch.linspace(1.0, 0.0, steps + 1, device="cuda") ** 2 + 1e-3  # denser near t=0
    traj = []
    for i in range(steps):
        dt = float(ts[i] - ts[i + 1])  # CLEAN: eager host read, outside the compiled step
        noise = torch.randn_like(x)  # CLEAN: eager RNG between compiled calls
        x = em_step(net, x.clone(), ts[i].view(1, 1), dt, noise)  # CLEAN: previous output fed back as a clone
        traj.append(x)  # HAZARD: static-address
    return x, traj


# --- from the comments: dt as a 0-d tensor, keep copies --------------------
@torch.compile(mode="max-autotune")
def em_step_fixed(net, x, t, dt, noise):
    drift = -0.5 * x - net(x, t)
    return x + drift * dt + torch.sqrt(dt) * noise  # CLEAN: dt is a device tensor, no guard on its value


@torch.no_grad()
def sample_fixed(net, n=4096, steps=100):
    x = torch.randn(n, 2, device="cuda")
    ts = torch.linspace(1.0, 0.0, steps + 1, device="cuda") ** 2 + 1e-3
    traj = []
    for i in range(steps):
        x = em_step_fixed(net, x.clone(), ts[i].view(1, 1), (ts[i] - ts[i + 1]).view(1, 1), torch.randn_like(x))
        traj.append(x.clone())  # CLEAN: cloned before the next call
    return x, traj


net = ScoreNet().cuda().eval()
x_end, traj = sample(net)
x_fix, traj_fix = sample_fixed(net)
print("post version :", [round(t.norm().item(), 2) for t in traj[::25]])
print("fixed version:", [round(t.norm().item(), 2) for t in traj_fix[::25]])
