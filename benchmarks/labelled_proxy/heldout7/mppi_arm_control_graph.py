"""MPPI torque controller for a 7-DoF arm with a learned dynamics model.

Every 10 ms control tick samples K torque sequences, rolls them through the learned
dynamics and a learned forward-kinematics net, weights them by cost and shifts the
nominal plan. The tick is captured as one CUDA graph and replayed by the RT loop.
"""
import torch
import torch.nn as nn


def mlp(i, o, h=256):
    return nn.Sequential(nn.Linear(i, h), nn.SiLU(), nn.Linear(h, h), nn.SiLU(), nn.Linear(h, o))


class MPPIController:
    def __init__(self, dyn, fk, obstacles, K=1024, T=30, sigma=0.3, u_max=40.0, device="cuda"):
        self.dyn, self.fk = dyn.eval().to(device), fk.eval().to(device)
        self.obstacles = obstacles.to(device)                       # (n_obs, 4): centre xyz, radius
        self.K, self.T, self.sigma, self.u_max = K, T, sigma, u_max
        self.temperature = 1.0
        self.U = torch.zeros(T, 7, device=device)
        self.static_state = torch.zeros(14, device=device)
        self.static_goal = torch.zeros(3, device=device)
        self.noise_gen = torch.Generator(device=device)
        self.noise_gen.manual_seed(0)
        self.viz_stream = torch.cuda.Stream()
        self.viz_buf = torch.zeros(16, T, 3).pin_memory()
        self.last_cmd = None
        self.graph = None

    def _rollout_cost(self, u):
        x = self.static_state.expand(u.shape[0], -1)
        cost = torch.zeros(u.shape[0], device=u.device)
        ee_path = []
        for t in range(self.T):
            x = x + self.dyn(torch.cat([x, u[:, t]], -1))
            ee = self.fk(x[:, :7])
            ee_path.append(ee)
            cost = cost + (ee - self.static_goal).pow(2).sum(-1) + 1e-4 * u[:, t].pow(2).sum(-1)
            d = (ee[:, None] - self.obstacles[None, :, :3]).norm(dim=-1) - self.obstacles[:, 3]
            cost = cost + 100.0 * torch.relu(0.05 - d).sum(-1)
        return cost, torch.stack(ee_path, 1)

    def _tick(self):
        eps = self.sigma * torch.randn(self.K, self.T, 7, device=self.U.device, generator=self.noise_gen)  # HAZARD: rng
        u = (self.U + eps).clamp(-self.u_max, self.u_max)
        cost, ee_path = self._rollout_cost(u)
        lam = self.temperature  # HAZARD: python-scalar
        w = torch.softmax(-(cost - cost.min()) / lam, 0)  # CLEAN: weights computed on the device, no host read
        self.U.add_((w[:, None, None] * eps).sum(0))
        cmd = self.U[0].clone()
        self.U.copy_(torch.roll(self.U, -1, 0))  # CLEAN: receding-horizon shift done in place
        self.U[-1].zero_()
        with torch.cuda.stream(self.viz_stream):  # HAZARD: stream
            best = ee_path[cost.topk(16, largest=False).indices]
            self.viz_buf.copy_(best, non_blocking=True)
        self.last_cmd = cmd.cpu().numpy()  # HAZARD: host-sync
        ess = 1.0 / w.pow(2).sum()
        return cmd, ess

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._tick()
        torch.cuda.current_stream().wait_stream(s)
        self.U.zero_()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_cmd, self.static_ess = self._tick()

    def adapt_temperature(self, ess, target=0.1):
        # keep the effective sample size near 10 % of K
        self.temperature *= 1.2 if ess < target * self.K else 0.9

    @torch.no_grad()
    def control_step(self, joint_state, goal_xyz):
        self.static_state.copy_(joint_state, non_blocking=True)  # CLEAN: copy_ into the captured input
        self.static_goal.copy_(goal_xyz, non_blocking=True)
        self.graph.replay()
        self.adapt_temperature(self.static_ess.item())
        return self.static_cmd.cpu()
