"""Learned hydrodynamic residual for a torpedo-shaped AUV, used by the mission planner's
rollouts. A Fossen-style rigid-body model is corrected by an MLP trained on DVL / IMU logs;
the step function and the sensor sanitiser are swapped for compiled versions at start-up.
"""
import torch
import torch.nn as nn

DT = 0.1
MASS = torch.tensor([38.0, 38.0, 38.0, 1.5, 4.9, 4.9])                    # rigid body + added mass, diagonal
QUAD_DAMP = torch.tensor([2.5, 20.0, 20.0, 0.5, 3.0, 3.0])               # quadratic drag coefficients


class Residual(nn.Module):
    def __init__(self, hid=128):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(12 + 3, hid), nn.Tanh(), nn.Linear(hid, hid), nn.Tanh(), nn.Linear(hid, 6))

    def forward(self, state, thrust):
        return self.net(torch.cat([state, thrust], -1))


RESIDUAL = Residual().cuda()
M, D = MASS.cuda(), QUAD_DAMP.cuda()


def step(state, thrust):
    """state: (B, 12) = eta (x, y, z, phi, theta, psi) + nu (u, v, w, p, q, r); thrust: (B, 3)."""
    eta, nu = state[:, :6], state[:, 6:]
    tau = torch.zeros_like(nu)
    tau[:, 0] = thrust[:, 0]  # CLEAN: in-place write to a tensor created inside the function, not to an input
    tau[:, 4:] = thrust[:, 1:] * 0.6                                        # fins -> pitch / yaw moments
    damping = -D * nu * nu.abs()
    nu_next = nu + DT * (tau + damping + RESIDUAL(state, thrust)) / M
    return torch.cat([eta + DT * nu_next, nu_next], -1)


def sanitize_(obs):
    obs[:, 6:9].clamp_(-3.0, 3.0)  # HAZARD: static-address
    return obs


def depth_log(state):
    return state[:, 2].cpu().numpy()  # HAZARD: host-sync


def install():
    global step, sanitize_, depth_log
    step = torch.compile(step, mode="reduce-overhead")
    sanitize_ = torch.compile(sanitize_, mode="reduce-overhead")
    depth_log = torch.compile(depth_log, mode="reduce-overhead")


@torch.no_grad()
def rollout(x0, plan):
    x, traj = x0, []
    for thrust in plan:
        x = step(x, thrust)  # HAZARD: static-address
        traj.append(depth_log(x))
    return traj


@torch.no_grad()
def rollout_safe(x0, plan):
    x, depths = x0, []
    for thrust in plan:
        x = step(x, thrust).clone()  # CLEAN: state cloned before it is fed back into the compiled step
        depths.append(x[:, 2].cpu())  # CLEAN: host read outside the compiled functions
    return torch.stack(depths)


def fit_residual(logs, epochs=40, lr=1e-3):
    opt = torch.optim.Adam(RESIDUAL.parameters(), lr=lr)
    opt_step = torch.compile(opt.step, mode="reduce-overhead")
    for epoch in range(epochs):
        if epoch % 10 == 9:
            opt.param_groups[0]["lr"] = lr * 0.3 ** (epoch // 10 + 1)  # HAZARD: optimizer
        for obs, thrust, nxt in logs:
            pred = step(sanitize_(obs), thrust)
            loss = (pred - nxt).pow(2).mean()
            loss.backward()
            opt_step()
            opt.zero_grad(set_to_none=True)


if __name__ == "__main__":
    install()
    logs = [(torch.randn(256, 12, device="cuda"), torch.randn(256, 3, device="cuda"), torch.randn(256, 12, device="cuda"))
            for _ in range(20)]
    fit_residual(logs)
    plan = [torch.tensor([40.0, 0.0, 0.1], device="cuda").repeat(64, 1) for _ in range(300)]
    depths = rollout(torch.zeros(64, 12, device="cuda"), plan)
    depths_ok = rollout_safe(torch.zeros(64, 12, device="cuda"), plan)
