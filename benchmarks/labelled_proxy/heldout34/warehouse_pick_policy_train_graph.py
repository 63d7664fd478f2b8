"""Behaviour-cloned grasp policy for a warehouse picking cell; the whole update is one captured CUDA graph."""
import torch
import torch.nn as nn
import torch.nn.functional as F

class OptimizerFactory:
    @staticmethod
    def policy(params, lr):
        return torch.optim.AdamW(params, lr=lr, capturable=True)  # CLEAN: capturable AdamW
    @staticmethod
    def value(params, lr):
        return torch.optim.Adam(params, lr=lr)

class Augment:
    def __init__(self, seed):
        self.seed, self.epoch = seed, 0
    def __call__(self, depth):
        torch.manual_seed(self.seed + self.epoch)  # HAZARD: rng
        return depth + 0.01 * torch.randn_like(depth)

class StepCounter:
    def __init__(self):
        self.n = 0
        self.n_t = torch.zeros((), dtype=torch.long, device="cuda")
    def on_step(self, loss):
        self.n_t.add_(1)  # CLEAN: device counter, replayed with the graph
        self.n += 1  # HAZARD: host-code

class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 32, 5, 2, 2), nn.ReLU(), nn.Conv2d(32, 64, 5, 2, 2), nn.ReLU(),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.grasp = nn.Linear(64, 6)
        self.value = nn.Linear(64, 1)
    def forward(self, depth):
        z = self.enc(depth)
        return self.grasp(z), self.value(z.detach()).squeeze(-1)

class Learner:
    def __init__(self, policy, callbacks, augment, batch=64):
        self.policy, self.callbacks, self.augment = policy.cuda(), callbacks, augment
        body = list(self.policy.enc.parameters()) + list(self.policy.grasp.parameters())
        self.opt = OptimizerFactory.policy(body, 3e-4)
        self.value_opt = OptimizerFactory.value(self.policy.value.parameters(), 1e-3)
        self.depth = torch.zeros(batch, 1, 96, 96, device="cuda")
        self.action = torch.zeros(batch, 6, device="cuda")
        self.success = torch.zeros(batch, device="cuda")
    def _losses(self):
        pred, v = self.policy(self.augment(self.depth))
        return F.mse_loss(pred, self.action), F.binary_cross_entropy_with_logits(v, self.success)
    def _update(self):
        self.opt.zero_grad(set_to_none=True)  # CLEAN: grads reallocated from the graph pool
        self.value_opt.zero_grad(set_to_none=True)
        bc, val = self._losses()
        (bc + 0.5 * val).backward()
        self.opt.step()
        self.value_opt.step()  # HAZARD: optimizer
        for cb in self.callbacks:
            cb.on_step(bc)
        self.loss = bc.detach()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._update()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):  # CLEAN: warmed on a side stream first
            self._update()
    def step(self, depth, action, success):
        self.depth.copy_(depth)  # CLEAN: copy_ into static inputs
        self.action.copy_(action)
        self.success.copy_(success)
        self.graph.replay()
        return self.loss

class WarmupLR:
    def __init__(self, learner, base, warm):
        self.learner, self.base, self.warm = learner, base, warm
    def after_replay(self, it):
        for g in self.learner.opt.param_groups:
            g["lr"] = self.base * min(1.0, (it + 1) / self.warm)  # HAZARD: optimizer

def train(loader, epochs=20):
    counter, aug = StepCounter(), Augment(seed=17)
    learner = Learner(Policy(), [counter], aug)
    learner.capture()
    sched, it = WarmupLR(learner, 3e-4, 500), 0
    for epoch in range(epochs):
        aug.epoch = epoch
        for depth, action, success in loader:
            loss = learner.step(depth.cuda(), action.cuda(), success.cuda())
            sched.after_replay(it)
            it += 1
        print(f"epoch {epoch} loss {loss.item():.4f} steps {int(counter.n_t)}")  # CLEAN: host reads outside the graph
