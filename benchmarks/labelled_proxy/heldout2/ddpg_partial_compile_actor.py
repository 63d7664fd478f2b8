"""DDPG with a shared `graphed = functools.partial(torch.compile, ...)` wrapper for hot paths."""
import functools

import torch
import torch.nn as nn
import torch.nn.functional as F

graphed = functools.partial(torch.compile, mode="reduce-overhead", dynamic=False)
plain = functools.partial(torch.compile, mode="default")


class Actor(nn.Module):
    def __init__(self, obs_dim=17, act_dim=6, max_action=1.0):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, 400), nn.ReLU(), nn.Linear(400, 300), nn.ReLU(), nn.Linear(300, act_dim))
        self.max_action = max_action

    def forward(self, obs):
        return torch.tanh(self.net(obs)) * self.max_action


class Critic(nn.Module):
    def __init__(self, obs_dim=17, act_dim=6):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim + act_dim, 400), nn.ReLU(), nn.Linear(400, 300), nn.ReLU(), nn.Linear(300, 1))

    def forward(self, obs, act):
        return self.net(torch.cat([obs, act], -1))


class DDPG:
    def __init__(self, obs_dim=17, act_dim=6, buffer_size=1_000_000):
        self.actor, self.critic = Actor(obs_dim, act_dim).cuda(), Critic(obs_dim, act_dim).cuda()
        self.actor_t, self.critic_t = Actor(obs_dim, act_dim).cuda(), Critic(obs_dim, act_dim).cuda()
        self.actor_t.load_state_dict(self.actor.state_dict())
        self.critic_t.load_state_dict(self.critic.state_dict())
        self.explore = graphed(self._explore)
        self.target_q = graphed(self._target_q)
        self.soft_update = graphed(self._soft_update)
        self.debug_q = plain(self._debug_q)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=1e-3)
        self.actions = torch.zeros(buffer_size, act_dim, device="cuda")
        self.recent_actions = []
        self.ptr = 0

    def _explore(self, obs, noise_scale):
        a = self.actor(obs)
        return (a + noise_scale * torch.randn_like(a)).clamp(-1.0, 1.0)  # HAZARD: python-scalar

    def _target_q(self, next_obs, rew, done, gamma=0.99):
        q_next = self.critic_t(next_obs, self.actor_t(next_obs))
        target = rew + gamma * (1 - done) * q_next
        self.last_target_mean = target.mean().item()  # HAZARD: host-sync
        return target

    @torch.no_grad()
    def _soft_update(self, tau=0.005):
        for net, tgt in ((self.actor, self.actor_t), (self.critic, self.critic_t)):
            torch._foreach_lerp_(list(tgt.parameters()), list(net.parameters()), tau)  # CLEAN: target parameters updated in place, addresses unchanged

    def _debug_q(self, obs, act):
        q = self.critic(obs, act)
        return q.mean().item(), q.std().item()  # CLEAN: default-mode compile, no CUDA graphs

    def act(self, obs, step, total_steps):
        noise_scale = 0.3 * max(0.05, 1.0 - step / total_steps)
        with torch.no_grad():
            a = self.explore(obs, noise_scale)
        self.actions[self.ptr].copy_(a[0])  # CLEAN: output copied into a preallocated device buffer
        self.recent_actions.append(a)  # HAZARD: static-address
        self.ptr += 1
        return a.cpu().numpy()

    def update_critic(self, batch):
        obs, act, rew, next_obs, done = (t.cuda(non_blocking=True) for t in batch)
        with torch.no_grad():
            target = self.target_q(next_obs, rew, done)
        loss = F.mse_loss(self.critic(obs, act), target)
        self.critic_opt.zero_grad(set_to_none=True)
        loss.backward()
        self.critic_opt.step()
        self.soft_update()
        return loss.detach()
