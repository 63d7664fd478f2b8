"""RL value-function update: the step is rebound to its compiled version inside main."""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

history = []
stats = {"calls": 0}


def value_step(net, obs, returns, gamma):
    stats["calls"] += 1  # HAZARD: host-code
    v = net(obs).squeeze(-1)
    target = returns * gamma  # HAZARD: python-scalar
    loss = F.smooth_l1_loss(v, target)
    history.append(loss.detach())  # HAZARD: host-code
    with open("value_loss.log", "a") as fh:  # HAZARD: host-code
        fh.write("step\n")
    return loss


def main(gamma_schedule=(0.9, 0.95, 0.99), iters=3000):
    global value_step
    net = nn.Sequential(nn.Linear(64, 256), nn.Tanh(), nn.Linear(256, 1)).cuda()
    opt = torch.optim.Adam(net.parameters(), lr=3e-4)
    value_step = torch.compile(value_step, mode="reduce-overhead")
    obs = torch.randn(512, 64, device="cuda")
    ret = torch.randn(512, device="cuda")
    start = time.time()  # CLEAN: host clock outside the compiled step
    for i in range(iters):
        gamma = gamma_schedule[min(i // 1000, len(gamma_schedule) - 1)]
        loss = value_step(net, obs, ret, gamma)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    print(f"done in {time.time() - start:.1f}s, final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
