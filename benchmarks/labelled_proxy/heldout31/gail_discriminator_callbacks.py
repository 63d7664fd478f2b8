"""GAIL for HalfCheetah: discriminator D(s, a) with gradient penalty; reward = -log(1 - D).

The discriminator trainer fires callbacks after every update (logging, timing, annealing).
The assistant captured `_step` (callbacks included) in a CUDA graph and replays it per update.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Discriminator(nn.Module):
    def __init__(self, obs_dim=17, act_dim=6, hidden=256):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim + act_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, s, a):
        return self.net(torch.cat([s, a], -1)).squeeze(-1)

    def reward(self, s, a):
        return -F.logsigmoid(-self(s, a))


class AccuracyLogger:
    def on_step(self, trainer, logit_exp, logit_pol):
        acc = 0.5 * ((logit_exp > 0).float().mean() + (logit_pol < 0).float().mean())
        trainer.history["disc_acc"].append(acc.item())  # HAZARD: host-sync

    def on_epoch_end(self, trainer):
        pass


class ThroughputTimer:
    def on_step(self, trainer, *_):
        trainer.history["t"].append(time.perf_counter())  # HAZARD: host-code

    def on_epoch_end(self, trainer):
        pass


class GPAnneal:
    def on_step(self, trainer, *_):
        pass

    def on_epoch_end(self, trainer):
        trainer.gp_coef = max(1.0, trainer.gp_coef * 0.9)


class DiscTrainer:
    def __init__(self, disc, expert_s, expert_a, batch=512, callbacks=(), seed=0):
        self.disc = disc
        self.expert_s, self.expert_a = expert_s, expert_a  # whole expert set on the GPU
        self.opt = torch.optim.Adam(disc.parameters(), lr=3e-4, capturable=True)  # CLEAN: capturable Adam
        self.expert_gen = torch.Generator(device="cuda").manual_seed(seed)
        self.gp_coef = 10.0
        self.callbacks = list(callbacks)
        self.history = {"disc_acc": [], "t": []}
        self.s_pol_s = torch.zeros(batch, expert_s.shape[1], device="cuda")
        self.s_pol_a = torch.zeros(batch, expert_a.shape[1], device="cuda")
        self.batch = batch
        self.graph = None

    def _step(self):
        idx = torch.randint(0, self.expert_s.shape[0], (self.batch,), device="cuda", generator=self.expert_gen)  # HAZARD: rng
        es, ea = self.expert_s[idx], self.expert_a[idx]  # CLEAN: gather with a CUDA index tensor
        le, lp = self.disc(es, ea), self.disc(self.s_pol_s, self.s_pol_a)
        loss = F.binary_cross_entropy_with_logits(le, torch.ones_like(le)) + F.binary_cross_entropy_with_logits(lp, torch.zeros_like(lp))
        eps = torch.rand(self.batch, 1, device="cuda")  # CLEAN: default CUDA generator
        mix_s = (eps * es + (1 - eps) * self.s_pol_s).requires_grad_(True)
        mix_a = (eps * ea + (1 - eps) * self.s_pol_a).requires_grad_(True)
        grads = torch.autograd.grad(self.disc(mix_s, mix_a).sum(), [mix_s, mix_a], create_graph=True)
        gp = (torch.cat(grads, -1).norm(dim=-1) - 1).pow(2).mean()
        loss = loss + self.gp_coef * gp  # HAZARD: python-scalar
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        for cb in self.callbacks:
            cb.on_step(self, le, lp)
        return loss

    def update(self, pol_s, pol_a):
        self.s_pol_s.copy_(pol_s)  # CLEAN: copy_ into static inputs
        self.s_pol_a.copy_(pol_a)
        if self.graph is None:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
                with torch.cuda.stream(s):
                    for _ in range(3):
                        self._step()
                torch.cuda.current_stream().wait_stream(s)
                self.graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(self.graph):
                    self.s_loss = self._step()
        self.graph.replay()
        return self.s_loss

    def end_epoch(self):
        for cb in self.callbacks:
            cb.on_epoch_end(self)
        return float(self.s_loss)  # CLEAN: host read between replays


def make_trainer(expert_s, expert_a):
    disc = Discriminator().cuda()
    return DiscTrainer(disc, expert_s, expert_a, callbacks=[AccuracyLogger(), ThroughputTimer(), GPAnneal()])
