# Blog post snippet: "20x faster GPU rollouts: capture the whole env+policy step
# in one CUDA graph". 4096 point-mass envs, Gaussian policy, epsilon-random
# actions. The post reports identical returns with and without the graph --
# they compared the first episode only.
import numpy as np
import torch
import torch.nn as nn

N_ENVS, OBS, ACT = 4096, 8, 2
dev = torch.device("cuda")


class Rollout:
    def __init__(self, policy, seed=0):
        self.policy = policy
        self.seed = seed
        self.episode = 0
        self.noise_gen = torch.Generator(device=dev)  # exploration noise
        self.noise_gen.manual_seed(seed)
        self.reset_gen = torch.Generator(device=dev)  # start states
        self.reset_gen.manual_seed(seed + 1)
        self.obs = torch.zeros(N_ENVS, OBS, device=dev)
        self.ret = torch.zeros(N_ENVS, device=dev)
        self.done = torch.zeros(N_ENVS, dtype=torch.bool, device=dev)

    @torch.no_grad()
    def step(self):
        torch.cuda.manual_seed(self.seed + self.episode)  # HAZARD: rng
        mu = self.policy(self.obs)
        noise = torch.randn(mu.shape, device=dev, generator=self.noise_gen)  # HAZARD: rng
        eps = np.random.uniform(0.05, 0.2)  # HAZARD: host-code
        rand_act = torch.rand_like(mu) * 2 - 1  # CLEAN: default CUDA generator
        explore = torch.rand(N_ENVS, 1, device=dev) < eps
        act = torch.where(explore, rand_act, mu + 0.1 * noise)
        pos = self.obs[:, :ACT] + 0.05 * act
        reward = -pos.pow(2).sum(1)
        self.ret.add_(reward)  # CLEAN: in-place accumulation into a captured buffer
        self.done.copy_(pos.abs().amax(1) > 3.0)
        fresh = torch.rand(N_ENVS, OBS, device=dev, generator=self.reset_gen)  # CLEAN: registered with the graph below
        new_obs = torch.cat([pos, self.obs[:, ACT:]], 1)
        self.obs.copy_(torch.where(self.done.unsqueeze(1), fresh, new_obs))  # CLEAN: where instead of a host branch
        if self.done.all():  # HAZARD: dynamic-control-flow
            self.episode += 1


policy = nn.Sequential(nn.Linear(OBS, 64), nn.Tanh(), nn.Linear(64, ACT)).to(dev)
ro = Rollout(policy)

s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        ro.step()
torch.cuda.current_stream().wait_stream(s)

g = torch.cuda.CUDAGraph()
g.register_generator_state(ro.reset_gen)
with torch.cuda.graph(g):
    ro.step()

for t in range(1000):
    g.replay()
    if t % 200 == 0:
        print(t, "mean return", ro.ret.mean().item(), "episode", ro.episode)
