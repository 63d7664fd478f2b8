"""Behaviour cloning of an MPC expert for quadrotor body-rate control.

The policy maps the last 10 observations (attitude, body rates, velocity, position error)
to collective thrust and three body-rate commands. Training data are expert rollouts
from a simulator. The policy is graphed with torch.cuda.make_graphed_callables; a
curriculum raises the thrust limit as the expert flies more aggressive tracks.
"""
import random
import torch
import torch.nn as nn
import torch.nn.functional as F

OBS, ACT, HIST, BATCH = 18, 4, 10, 4096
MAX_RATE = 6.0  # rad/s


class RatePolicy(nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(OBS, hidden), nn.Tanh())
        self.temporal = nn.Conv1d(hidden, hidden, HIST)
        self.head = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, ACT))
        self.obs_dropout = 0.05
        self.thrust_limit = 0.6  # fraction of max thrust, raised by the curriculum

    def forward(self, obs_hist):
        if self.training and random.random() < self.obs_dropout:  # HAZARD: host-code
            obs_hist = torch.cat([torch.zeros_like(obs_hist[:, :-1]), obs_hist[:, -1:]], 1)
        h = self.temporal(self.enc(obs_hist).transpose(1, 2)).squeeze(-1)
        a = torch.tanh(self.head(h))
        thrust = 0.5 * (a[:, :1] + 1.0) * self.thrust_limit  # HAZARD: python-scalar
        return torch.cat([thrust, a[:, 1:] * MAX_RATE], -1)


@torch.autocast("cuda", dtype=torch.bfloat16)  # HAZARD: autocast-cache
def graph_policy(policy):
    sample = torch.randn(BATCH, HIST, OBS, device="cuda")
    return torch.cuda.make_graphed_callables(policy, (sample,), num_warmup_iters=3)


class ActionStats:
    def __init__(self):
        self.last = None

    def __call__(self, mod, inp, out):
        self.last = out.detach().abs().mean(0)


def train(policy, loader, epochs=50):
    policy.train()
    opt = torch.optim.Adam(policy.parameters(), lr=3e-4)
    graphed = graph_policy(policy)
    stats = ActionStats()
    policy.head.register_forward_hook(stats)  # CLEAN: hook registered after graphing
    for ep in range(epochs):
        if ep in (10, 25, 40):
            policy.thrust_limit = min(1.0, policy.thrust_limit + 0.15)
        for obs_hist, expert_act in loader():
            pred = graphed(obs_hist=obs_hist)  # HAZARD: api-misuse
            loss = F.smooth_l1_loss(pred, expert_act)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            opt.step()  # CLEAN: eager optimizer step outside the graphed callable
        print(f"epoch {ep} loss {loss.item():.4f}")
    return graphed


@torch.no_grad()
def validate(graphed, policy, loader):
    policy.eval()
    errs = []
    for obs_hist, expert_act in loader():
        pred = graphed(obs_hist)  # CLEAN: positional tensor argument; eval mode runs the eager forward
        errs.append(F.l1_loss(pred, expert_act, reduction="none").mean(0))
    policy.train()
    return torch.stack(errs).mean(0)


if __name__ == "__main__":
    def loader(n=20):
        for _ in range(n):
            yield torch.randn(BATCH, HIST, OBS, device="cuda"), torch.rand(BATCH, ACT, device="cuda")
    policy = RatePolicy().cuda()
    graphed = train(policy, loader)
    print("per-channel L1:", validate(graphed, policy, loader).tolist())
