"""Physics step function compiled with options={"triton.cudagraphs": True}."""
import random
import time

import torch

DT = 1e-3


def integrate(pos, vel, force, mass):
    t_start = time.time()  # HAZARD: host-code
    acc = force / mass
    vel = vel + DT * acc
    if vel.abs().max() > 1e3:  # HAZARD: dynamic-control-flow
        vel = vel.clamp(-1e3, 1e3)
    pos = pos + DT * vel
    jitter = random.random() * 1e-6  # HAZARD: host-code
    pos = pos + jitter
    print("max speed", vel.norm(dim=-1).max())  # HAZARD: host-sync
    print(f"step took {time.time() - t_start:.2e}s")  # HAZARD: host-code
    return pos, vel


def integrate_debug(pos, vel, force, mass):
    acc = force / mass
    vel = vel + DT * acc
    print("max speed", vel.norm(dim=-1).max())  # CLEAN: this variant is compiled without cudagraphs
    return pos + DT * vel, vel


step = torch.compile(integrate, options={"triton.cudagraphs": True})
step_debug = torch.compile(integrate_debug, mode="max-autotune-no-cudagraphs")


def simulate(n=100_000, steps=1000, debug=False):
    pos = torch.randn(n, 3, device="cuda")
    vel = torch.zeros(n, 3, device="cuda")
    mass = torch.rand(n, 1, device="cuda") + 0.5
    fn = step_debug if debug else step
    for i in range(steps):
        force = -pos * 4.0
        pos, vel = fn(pos, vel, force, mass)
        if i % 100 == 0:
            print(i, pos.abs().max().item())
    return pos
