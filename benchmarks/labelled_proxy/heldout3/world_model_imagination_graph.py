"""Dreamer-style behaviour learning: imagined rollouts in a learned latent model.

The whole actor-critic update (imagine H steps, lambda-returns, both losses and
optimizer steps) is captured once and replayed every training iteration.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class LatentDynamics(nn.Module):
    def __init__(self, stoch=32, classes=32, deter=512, act_dim=6):
        super().__init__()
        self.stoch, self.classes = stoch, classes
        self.gru = nn.GRUCell(stoch * classes + act_dim, deter)
        self.prior = nn.Linear(deter, stoch * classes)
        self.reward = nn.Linear(deter + stoch * classes, 1)
        self.cont = nn.Linear(deter + stoch * classes, 1)

    def img_step(self, z, h, a):
        h = self.gru(torch.cat([z, a], -1), h)
        logits = self.prior(h).view(-1, self.stoch, self.classes)
        z = F.gumbel_softmax(logits, tau=1.0, hard=True).flatten(1)  # CLEAN: default CUDA generator, capturable
        return z, h


class ImaginationTrainer:
    def __init__(self, wm, actor, critic, horizon=15, gamma=0.997, lam=0.95, seed=0):
        self.wm, self.actor, self.critic = wm, actor, critic
        self.horizon, self.gamma, self.lam, self.seed = horizon, gamma, lam, seed
        self.actor_opt = torch.optim.Adam(actor.parameters(), lr=3e-5, eps=1e-5)
        self.critic_opt = torch.optim.Adam(critic.parameters(), lr=3e-5, eps=1e-5, capturable=True)
        self.it = 0
        self.graph = None

    def imagine(self, z, h):
        feats, rewards, conts = [], [], []
        for t in range(self.horizon):
            a = F.gumbel_softmax(self.actor(torch.cat([z, h], -1)), hard=True)
            z, h = self.wm.img_step(z, h, a)
            f = torch.cat([h, z], -1)
            c = torch.sigmoid(self.wm.cont(f))
            feats.append(f)
            rewards.append(self.wm.reward(f))
            conts.append(c)
            if (c < 0.05).all():  # HAZARD: dynamic-control-flow
                break
        return torch.stack(feats), torch.stack(rewards), torch.stack(conts)

    def lambda_returns(self, rew, cont, val):
        ret, out = val[-1], []
        for t in reversed(range(rew.shape[0] - 1)):
            ret = rew[t] + self.gamma * cont[t] * ((1 - self.lam) * val[t + 1] + self.lam * ret)
            out.append(ret)
        return torch.stack(out[::-1])

    def train_step(self, start_z, start_h):
        torch.cuda.manual_seed(self.seed + self.it)  # HAZARD: rng
        self.it += 1  # HAZARD: host-code
        with torch.no_grad():
            feats, rew, cont = self.imagine(start_z, start_h)
        with torch.random.fork_rng(devices=[start_z.device]):  # CLEAN: reads and restores the same state, allowed in capture
            logits = self.actor(feats[:-1].detach())
        val = self.critic(feats).squeeze(-1)
        ret = self.lambda_returns(rew.squeeze(-1), cont.squeeze(-1), val.detach())
        adv = (ret - val[:-1]).detach()
        actor_loss = -(F.log_softmax(logits, -1).max(-1).values * adv).mean()
        critic_loss = F.mse_loss(val[:-1], ret)
        self.actor_opt.zero_grad(set_to_none=False)
        self.critic_opt.zero_grad(set_to_none=False)
        (actor_loss + critic_loss).backward()
        self.actor_opt.step()  # HAZARD: optimizer
        self.critic_opt.step()  # CLEAN: capturable=True keeps step/lr bookkeeping on the device
        return actor_loss.detach(), critic_loss.detach()

    def run(self, replay, iters, critic_lr_schedule):
        z0, h0 = replay.sample_starts()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self.train_step(z0, h0)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.losses = self.train_step(z0, h0)
        for i in range(iters):
            z, h = replay.sample_starts()
            z0.copy_(z)
            h0.copy_(h)
            self.graph.replay()
            self.critic_opt.param_groups[0]["lr"] = critic_lr_schedule(i)  # HAZARD: optimizer
