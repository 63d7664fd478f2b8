"""Neural contextual bandit that picks the next practice exercise in a maths tutor.

Context = learner embedding + exercise features + IRT difficulty; reward = solved
on the first try within the target time. The online update (forward, loss,
backward, Adam) and the Thompson-style pick are captured in one CUDA graph and
replayed after every answered exercise.
"""
import random

import numpy as np
import torch
import torch.nn as nn


class RewardNet(nn.Module):
    def __init__(self, d_learner=32, d_item=16):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(d_learner + d_item + 1, 128), nn.ReLU(), nn.Linear(128, 1))

    def forward(self, learner, items, difficulty):
        ctx = torch.cat([learner.expand(items.shape[0], -1), items, difficulty], dim=-1)
        return self.mlp(ctx).squeeze(-1)


class ExerciseBandit:
    def __init__(self, net, item_feats, difficulty: np.ndarray, eps=0.05, device="cuda"):
        self.dev = device
        self.net = net.to(device)
        self.items = item_feats.to(device)  # (N_items, 16)
        self.difficulty_np = difficulty.astype(np.float32)  # IRT b-parameters, re-estimated nightly
        self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-3)
        self.ts_gen = torch.Generator(device=device)
        self.ts_gen.manual_seed(0)
        self.eps = eps
        self.learner = torch.zeros(1, 32, device=device)
        self.mastered = torch.zeros(item_feats.shape[0], dtype=torch.bool, device=device)
        self.last_item = torch.zeros(1, dtype=torch.long, device=device)
        self.reward = torch.zeros(1, device=device)
        self.n_updates = torch.zeros((), device=device)
        self.graph = None

    def _update_and_pick(self):
        diff = torch.from_numpy(self.difficulty_np).cuda().unsqueeze(-1)  # HAZARD: pinned-memory
        pred = self.net(self.learner, self.items, diff)
        loss = (pred[self.last_item] - self.reward).pow(2).mean()
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()  # HAZARD: optimizer
        self.n_updates.add_(1)  # CLEAN: device-side counter, replayed with the graph
        with torch.no_grad():
            noise = torch.randn(pred.shape, device=self.dev, generator=self.ts_gen)  # HAZARD: rng
            sample = (pred + 0.1 * noise).masked_fill(self.mastered, float("-inf"))  # CLEAN: masked_fill keeps the shape
            explore = random.random() < self.eps  # HAZARD: host-code
            scores = torch.zeros_like(sample).masked_fill(self.mastered, float("-inf")) if explore else sample
            probs = torch.softmax(scores / 0.05, dim=0)
            return torch.multinomial(probs, 1)  # CLEAN: default-generator multinomial is capturable

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._update_and_pick()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.next_item = self._update_and_pick()

    def answer(self, solved: bool, seconds: float, target_s=90.0):
        self.reward.fill_(float(solved and seconds <= target_s))
        self.graph.replay()
        self.last_item.copy_(self.next_item)  # CLEAN: in-place copy into the graph's input
        return int(self.next_item)  # CLEAN: host read after the replay, outside capture


if __name__ == "__main__":
    items = torch.randn(400, 16)
    bandit = ExerciseBandit(RewardNet(), items, np.random.randn(400))
    bandit.capture()
    item = int(bandit.next_item)
    for _ in range(50):
        solved = random.random() < 0.6
        item = bandit.answer(solved, seconds=random.uniform(20, 150))
    print("next exercise:", item, "updates:", int(bandit.n_updates))
