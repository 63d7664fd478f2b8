"""Aurora-style learned congestion control evaluated in a flow-level network simulator.

The policy sees the last 10 monitor intervals (latency gradient, latency ratio, sending
ratio) of every flow and outputs a rate-change action. `Controller` used to call it
eagerly; the reduce-overhead path was added for the 1024-flow dumbbell sweeps.
"""
import logging

import numpy as np
import torch
import torch.nn as nn

log = logging.getLogger("aurora")
HIST, FEAT, DELTA = 10, 3, 0.025
N_FLOWS = 1024


class AuroraPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(HIST * FEAT, 32), nn.Tanh(), nn.Linear(32, 16), nn.Tanh(), nn.Linear(16, 2))

    def forward(self, hist):
        mu, log_std = self.net(hist.flatten(1)).unbind(-1)
        return mu, log_std


@torch.compile(mode="reduce-overhead")
def push_history_(hist, obs):
    hist.copy_(torch.cat([hist[:, 1:], obs[:, None]], dim=1))  # HAZARD: static-address
    return hist


def apply_action(rates, a):
    return rates * torch.where(a > 0, 1 + DELTA * a, 1 / (1 - DELTA * a))  # CLEAN: where instead of a data-dependent branch


class Controller:
    def __init__(self, policy, mode="det", device="cuda"):
        self.policy = policy.to(device).eval()
        self.mode, self.dev = mode, device
        for name in ("det", "stoch"):
            setattr(self, f"act_{name}", torch.compile(getattr(self, f"_{name}"), mode="reduce-overhead"))
        self.stats, self.trace = [], []

    def _det(self, hist, rates):
        mu, _ = self.policy(hist)
        self.stats.append((mu > 0).float().mean().item())  # HAZARD: host-sync
        log.debug("mean action %s", mu.mean())  # HAZARD: host-code
        return apply_action(rates, mu)

    def _stoch(self, hist, rates):
        mu, log_std = self.policy(hist)
        return apply_action(rates, mu + log_std.exp() * torch.randn_like(mu))

    @torch.no_grad()
    def run(self, sim, intervals=2000):
        hist = torch.zeros(N_FLOWS, HIST, FEAT, device=self.dev)
        rates = torch.full((N_FLOWS,), sim.init_rate, device=self.dev)
        act = getattr(self, f"act_{self.mode}")
        for t in range(intervals):
            obs = torch.from_numpy(sim.observe()).float().to(self.dev)       # (N_FLOWS, 3)
            hist = push_history_(hist, obs)
            new_rates = act(hist, rates)
            self.trace.append(new_rates)  # HAZARD: static-address
            rates = new_rates.clone()  # CLEAN: cloned before it is fed back into the compiled call
            sim.step(rates.cpu().numpy())  # CLEAN: host copy taken right after the compiled call
        return sim.summary()

    def export_trace(self, path):
        np.save(path, torch.stack(self.trace).cpu().numpy())


@torch.no_grad()
def eager_baseline(policy, sim, intervals=2000):
    hist = torch.zeros(N_FLOWS, HIST, FEAT, device="cuda")
    rates = torch.full((N_FLOWS,), sim.init_rate, device="cuda")
    for _ in range(intervals):
        obs = torch.from_numpy(sim.observe()).float().cuda()
        hist = torch.cat([hist[:, 1:], obs[:, None]], dim=1)
        mu, _ = policy(hist)
        rates = apply_action(rates, mu)
        sim.step(rates.cpu().numpy())
    return sim.summary()


if __name__ == "__main__":
    from flowsim import Dumbbell

    pol = AuroraPolicy()
    pol.load_state_dict(torch.load("aurora_pcc.pt", weights_only=True))
    for bw in (12, 48, 100):
        sim = Dumbbell(n_flows=N_FLOWS, bottleneck_mbps=bw, rtt_ms=40, seed=bw)
        ctl = Controller(pol)
        print(bw, "Mbps", ctl.run(sim))
        ctl.export_trace(f"trace_{bw}mbps.npy")
        print(bw, "Mbps eager", eager_baseline(pol.cuda().eval(), Dumbbell(N_FLOWS, bw, 40, seed=bw)))
