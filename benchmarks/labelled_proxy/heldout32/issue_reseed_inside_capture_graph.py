# pytorch#84967 fixed "manual_seed after capture has no effect on replay", so I
# moved the per-epoch reseed *into* the captured step to make every epoch
# reproducible. Now capture fails (set_current_seed ... only if new seed is the
# same as the original seed) and, with the reseed removed, the private mask
# generator fails too ("Attempt to increase offset for a CUDA generator not in
# capture mode"). step_v2 is the version that works. torch 2.11, H200.
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 1234
dev = torch.device("cuda")
net = nn.Sequential(nn.Linear(128, 256), nn.GELU(), nn.Linear(256, 128)).to(dev)
mask_gen = torch.Generator(device=dev)
mask_gen.manual_seed(7)
epoch = 0


def step_v1(x):
    torch.cuda.manual_seed(SEED + epoch)  # HAZARD: rng
    keep = torch.bernoulli(torch.full_like(x, 0.9), generator=mask_gen)  # HAZARD: rng
    snap = mask_gen.clone_state()  # HAZARD: rng
    h = net(x * keep)
    if random.random() < 0.5:  # HAZARD: host-code
        h = h.flip(0)
    return F.dropout(h, p=0.1, training=True), snap


def step_v2(x):
    keep = torch.bernoulli(torch.full_like(x, 0.9), generator=mask_gen)  # CLEAN: mask_gen is registered with g2
    with torch.random.fork_rng(devices=[0]):  # CLEAN: reads and restores the same state inside the capture
        h = net(x * keep)
    return F.dropout(h, p=0.1, training=True)  # CLEAN: default CUDA generator


def capture(fn, x, gens=()):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    global epoch
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(3):
            fn(x)
            epoch += 1
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    for gen in gens:
        g.register_generator_state(gen)
    with torch.no_grad(), torch.cuda.graph(g):
        out = fn(x)
    return g, out


x = torch.randn(64, 128, device=dev)
try:
    capture(step_v1, x)
except RuntimeError as e:
    print("v1:", str(e).splitlines()[0])

g2, out2 = capture(step_v2, x, gens=(mask_gen,))
for ep in range(3):
    torch.cuda.manual_seed(SEED + ep)  # CLEAN: reseeding between replays, outside the capture
    g2.replay()
    print(ep, out2.sum().item())
