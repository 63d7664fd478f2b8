"""Online container loading for an e-commerce fulfilment centre.

Boxes arrive on the conveyor in order; a policy looks at the container's
height map and the next box and chooses where to put it (cell x orientation).
Trained with REINFORCE on simulated order waves. The loss and the optimizer
step are compiled with the "cudagraphs" backend.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

GRID, N_ORIENT, BATCH = 20, 2, 256


class PackingPolicy(nn.Module):
    def __init__(self, ch=64):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1 + 3, ch, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(ch, ch, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(ch, N_ORIENT, 1))

    def forward(self, hmap, box):
        planes = box[:, :, None, None].expand(-1, -1, GRID, GRID)
        return self.conv(torch.cat([hmap[:, None], planes], 1))


def feasible_mask(hmap, box):
    # a placement is feasible if the box stays inside the container
    l, w = (box[:, 0] * GRID).long(), (box[:, 1] * GRID).long()
    idx = torch.arange(GRID, device=hmap.device)
    fit_x = idx[None, :] + l[:, None] <= GRID
    fit_y = idx[None, :] + w[:, None] <= GRID
    m = fit_x[:, :, None] & fit_y[:, None, :]
    return torch.stack([m, m.transpose(1, 2)], 1)


@torch.no_grad()
def rollout(policy, hmap, box):
    logits = policy(hmap, box).masked_fill(~feasible_mask(hmap, box), -1e9)
    action = torch.multinomial(logits.flatten(1).softmax(-1), 1).squeeze(1)  # CLEAN: eager sampling outside the compiled region
    util = torch.rand(BATCH, device="cuda")
    return hmap, box, action, util, feasible_mask(hmap, box)


class PackingTrainer:
    def __init__(self, policy):
        self.policy = policy.cuda().train()
        self.opt = torch.optim.Adam(self.policy.parameters(), lr=3e-4, capturable=True)
        self.entropy_coef = 0.05
        self.loss_fn = torch.compile(self._loss, backend="cudagraphs")
        self.opt_step = torch.compile(self.opt.step, backend="cudagraphs")

    def _loss(self, hmap, box, action, ret, feasible):
        swap = np.random.rand() < 0.5  # HAZARD: host-code
        if swap:
            box = torch.stack([box[:, 1], box[:, 0], box[:, 2]], -1)
        logits = self.policy(hmap, box)
        if feasible.sum() == 0:  # HAZARD: dynamic-control-flow
            return logits.sum() * 0.0
        logits = torch.where(feasible, logits, torch.full_like(logits, -1e9))  # CLEAN: mask applied without a data-dependent shape
        logp_all = F.log_softmax(logits.flatten(1), -1)
        logp = logp_all.gather(1, action[:, None]).squeeze(1)
        entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
        beta = self.entropy_coef  # HAZARD: python-scalar
        return -(logp * (ret - ret.mean())).mean() - beta * entropy

    def train(self, iters=20000):
        for it in range(iters):
            hmap = torch.rand(BATCH, GRID, GRID, device="cuda")
            box = torch.rand(BATCH, 3, device="cuda") * 0.4 + 0.05
            loss = self.loss_fn(*rollout(self.policy, hmap, box))
            loss.backward()
            self.opt_step()
            self.opt.zero_grad(set_to_none=False)
            if it % 2000 == 1999:
                for group in self.opt.param_groups:
                    group["lr"] *= 0.5  # HAZARD: optimizer
            if it in (5000, 10000, 15000):
                self.entropy_coef *= 0.5


@torch.compile
def greedy_fill_rate(policy, hmap, box):
    logits = policy(hmap, box).masked_fill(~feasible_mask(hmap, box), -1e9)
    print("evaluating greedy placements", logits.shape)  # CLEAN: default torch.compile, no CUDA graphs
    return logits.flatten(1).argmax(-1)


if __name__ == "__main__":
    trainer = PackingTrainer(PackingPolicy())
    trainer.train()
    with torch.no_grad():
        trainer.policy.eval()
        moves = greedy_fill_rate(trainer.policy, torch.zeros(BATCH, GRID, GRID, device="cuda"),
                                 torch.rand(BATCH, 3, device="cuda") * 0.4)
