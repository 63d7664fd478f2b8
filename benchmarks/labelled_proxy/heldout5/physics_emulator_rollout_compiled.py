"""MeshGraphNet-style flow emulator; the rollout step is swapped for a reduce-overhead compiled version."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CFG = {"dt": 0.01, "noise_std": 3e-3, "dx": 0.02}
NORMAL, WALL = 0, 1


def mlp(i, o, h=128):
    return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, o), nn.LayerNorm(o))


class Processor(nn.Module):
    def __init__(self, h=128, steps=8):
        super().__init__()
        self.edge = nn.ModuleList(mlp(3 * h, h) for _ in range(steps))
        self.node = nn.ModuleList(mlp(2 * h, h) for _ in range(steps))

    def forward(self, v, e, senders, receivers):
        for fe, fn in zip(self.edge, self.node):
            e = e + fe(torch.cat([v[senders], v[receivers], e], -1))
            agg = torch.zeros_like(v).index_add_(0, receivers, e)
            v = v + fn(torch.cat([v, agg], -1))
        return v


class Emulator(nn.Module):
    def __init__(self, h=128):
        super().__init__()
        self.enc_v, self.enc_e = mlp(2 + 2, h), mlp(3, h)
        self.proc = Processor(h)
        self.dec = nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 2))


model = Emulator().cuda()
mesh = torch.load("cylinder_mesh.pt")
senders, receivers = mesh["senders"].cuda(), mesh["receivers"].cuda()
node_type = mesh["node_type"].cuda()
is_wall = (node_type == WALL)[:, None]


def rollout_step(pos, vel, training_noise: bool = False):
    dt = CFG["dt"]  # HAZARD: python-scalar
    if training_noise:
        vel = vel + torch.from_numpy(np.random.normal(0, CFG["noise_std"], tuple(vel.shape)).astype(np.float32)).to(vel.device)  # HAZARD: host-code
    rel = pos[senders] - pos[receivers]
    e = model.enc_e(torch.cat([rel, rel.norm(dim=-1, keepdim=True)], -1))
    v = model.enc_v(torch.cat([vel, F.one_hot(node_type, 2).float()], -1))
    acc = model.dec(model.proc(v, e, senders, receivers))
    new_vel = torch.where(is_wall, torch.zeros_like(vel), vel + dt * acc)  # CLEAN: wall nodes pinned with torch.where, no boolean indexing
    if new_vel.abs().amax() * dt > CFG["dx"]:  # HAZARD: dynamic-control-flow
        new_vel = new_vel * 0.5
    return pos + dt * new_vel, new_vel


def compile_all():
    global rollout_step
    rollout_step = torch.compile(rollout_step, mode="reduce-overhead")


def adapt_dt(vel):
    vmax = vel.abs().max().item()  # CLEAN: .item() in the eager driver, outside the compiled step
    return float(min(0.01, 0.4 * CFG["dx"] / max(vmax, 1e-6)))


@torch.no_grad()
def rollout(pos, vel, n_steps=400):
    states = []
    for t in range(n_steps):
        pos, vel = rollout_step(pos, vel)
        states.append(pos)  # HAZARD: static-address
        if t % 50 == 49:
            CFG["dt"] = adapt_dt(vel)
    return torch.stack(states)


@torch.no_grad()
def evaluate(pos, vel, gt, n_steps=100):
    traj = []
    for t in range(n_steps):
        pos, vel = rollout_step(pos, vel)
        traj.append(pos.clone())  # CLEAN: output cloned before the next step
    traj = torch.stack(traj)
    return ((traj - gt[:n_steps]) ** 2).mean(dim=(1, 2))


def train(loader, epochs=10):
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for epoch in range(epochs):
        for pos, vel, target_vel in loader:
            _, new_vel = rollout_step(pos.cuda(), vel.cuda(), training_noise=True)
            loss = F.mse_loss(new_vel, target_vel.cuda())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        print(f"epoch {epoch}: {loss.item():.5f}")


if __name__ == "__main__":
    compile_all()
    n = node_type.shape[0]
    pos0, vel0 = mesh["pos"].cuda(), torch.zeros(n, 2, device="cuda")
    print(rollout(pos0, vel0).shape)
