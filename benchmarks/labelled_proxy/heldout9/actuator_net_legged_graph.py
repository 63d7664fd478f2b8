"""Quadruped control tick (policy + learned actuator model) captured as one CUDA graph.

Used for sim-to-real evaluation of many robots in parallel: the locomotion policy maps
proprioception and the joystick command to joint targets, and an actuator network (as in
Hwangbo et al.) maps the position-error / velocity history to joint torques.
"""
import torch
import torch.nn as nn

N_JOINTS, HIST = 12, 3


def mlp(sizes, act=nn.ELU):
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), act()]
    return nn.Sequential(*layers[:-1])


class ControlTick:
    def __init__(self, policy, actuator, n_envs=4096, obs_dim=39, tau_limit=33.5):
        self.policy, self.actuator = policy.cuda().eval(), actuator.cuda().eval()
        self.n = n_envs
        self.tau_limit = tau_limit
        self.command = (0.6, 0.0, 0.0)           # vx, vy, yaw rate from the joystick
        self.obs_noise = 0.02
        self.estop = False
        self.obs = torch.zeros(n_envs, obs_dim, device="cuda")
        self.q_err_hist = torch.zeros(n_envs, HIST, N_JOINTS, device="cuda")
        self.dq_hist = torch.zeros(n_envs, HIST, N_JOINTS, device="cuda")
        self.prev_action = torch.zeros(n_envs, N_JOINTS, device="cuda")
        self.log_buf = torch.zeros(n_envs, N_JOINTS, device="cuda")
        self.log_stream = torch.cuda.Stream()
        self.obs_gen = torch.Generator(device="cuda").manual_seed(7)
        self.act_gen = torch.Generator(device="cuda").manual_seed(11)
        self.graph = torch.cuda.CUDAGraph()

    def _tick(self, q, dq, q_default):
        obs = self.obs.clone()
        obs[:, 0:12] = q - q_default
        obs[:, 12:24] = dq * 0.05
        obs[:, 24:36] = self.prev_action
        vx, vy, wz = self.command  # HAZARD: python-scalar
        obs[:, 36], obs[:, 37], obs[:, 38] = 2.0 * vx, 2.0 * vy, 0.25 * wz
        obs = obs + self.obs_noise * torch.randn(obs.shape, device=obs.device, generator=self.obs_gen)  # HAZARD: rng
        action = self.policy(obs)
        action = action + 0.01 * torch.randn(action.shape, device=action.device, generator=self.act_gen)  # CLEAN: generator registered with the graph before capture
        q_target = q_default + 0.25 * action
        q_err = q_target - q
        self.q_err_hist = torch.cat([self.q_err_hist[:, 1:], q_err[:, None]], dim=1)  # HAZARD: static-address
        self.dq_hist[:, :-1].copy_(self.dq_hist[:, 1:].clone())
        self.dq_hist[:, -1].copy_(dq)  # CLEAN: in-place update of the velocity history
        feats = torch.cat([self.q_err_hist, self.dq_hist], dim=1).transpose(1, 2).reshape(-1, 2 * HIST)
        tau = self.actuator(feats).view(self.n, N_JOINTS)
        self.prev_action.copy_(action)
        peak = float(tau.abs().max())  # HAZARD: host-sync
        if peak > 1.5 * self.tau_limit:
            self.estop = True
        with torch.cuda.stream(self.log_stream):  # HAZARD: stream
            self.log_buf.copy_(tau)
        return tau.clamp(-self.tau_limit, self.tau_limit)

    def capture(self, q, dq, q_default):
        self.static = (q, dq, q_default)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(s):
            for _ in range(3):
                self._tick(*self.static)
        torch.cuda.current_stream().wait_stream(s)
        self.graph.register_generator_state(self.act_gen)
        with torch.no_grad(), torch.cuda.graph(self.graph):
            self.tau_out = self._tick(*self.static)

    def step(self, q, dq):
        self.static[0].copy_(q)
        self.static[1].copy_(dq)
        self.graph.replay()
        return self.tau_out


if __name__ == "__main__":
    policy = mlp([39, 512, 256, 128, N_JOINTS])
    actuator = mlp([2 * HIST, 32, 32, 1], act=nn.Softsign)
    ctl = ControlTick(policy, actuator)
    q0 = torch.tensor([0.0, 0.8, -1.5] * 4, device="cuda").expand(4096, -1).contiguous()  # CLEAN: built before capture
    ctl.capture(q0.clone(), torch.zeros_like(q0), q0)
    q, dq = q0.clone(), torch.zeros_like(q0)
    for t in range(2000):
        if t % 400 == 0:
            ctl.command = (0.2 + 0.2 * (t // 400), 0.0, 0.1)
        tau = ctl.step(q, dq)
        dq = dq + 0.0025 * (tau / 0.8 - 0.5 * dq)
        q = q + 0.0025 * dq
