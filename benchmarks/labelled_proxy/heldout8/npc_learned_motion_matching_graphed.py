"""Learned motion matching for NPC locomotion in an open-world game.

Three small networks replace the motion-matching database: the decompressor
(features + latent -> pose), the stepper (advances features/latent one frame)
and the projector (query -> nearest features/latent).  They are trained
jointly; all three are graphed with torch.cuda.make_graphed_callables.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_FEAT, N_LAT, N_POSE, N_QUERY = 27, 32, 23 * 13, 27


def mlp(i, o, h=512):
    return nn.Sequential(nn.Linear(i, h), nn.ELU(), nn.Linear(h, h), nn.ELU(), nn.Linear(h, o))


class Decompressor(nn.Module):
    def __init__(self, gen):
        super().__init__()
        self.net = mlp(N_FEAT + N_LAT, N_POSE)
        self.gen = gen

    def forward(self, x, z):
        noise = torch.randn(z.shape, device=z.device, generator=self.gen)  # HAZARD: rng
        return self.net(torch.cat([x, z + 0.01 * noise], -1))


class Stepper(nn.Module):
    def __init__(self, fps=60):
        super().__init__()
        self.net = mlp(N_FEAT + N_LAT, N_FEAT + N_LAT)
        self.dt = 1.0 / fps

    def forward(self, x, z):
        dt = self.dt  # HAZARD: python-scalar
        dx, dz = self.net(torch.cat([x, z], -1)).split([N_FEAT, N_LAT], -1)
        return x + dt * dx, z + dt * dz


class Projector(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp(N_QUERY, N_FEAT + N_LAT)

    def forward(self, query):
        if torch.isnan(query).any():  # HAZARD: dynamic-control-flow
            query = torch.nan_to_num(query)
        query = query + 0.005 * torch.randn_like(query)  # CLEAN: default CUDA generator, graph-safe
        x, z = self.net(query).split([N_FEAT, N_LAT], -1)
        return x, z


@torch.autocast("cuda", dtype=torch.bfloat16)  # HAZARD: autocast-cache
def graph_modules(modules, samples, warmup=5):
    return torch.cuda.make_graphed_callables(modules, samples, num_warmup_iters=warmup)


class LMMTrainer:
    def __init__(self, batch=1024, seed=3):
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(seed)
        self.stepper_eager = Stepper().cuda()
        mods = (Decompressor(self.gen).cuda(), self.stepper_eager, Projector().cuda())
        x = torch.randn(batch, N_FEAT, device="cuda")
        z = torch.randn(batch, N_LAT, device="cuda")
        q = torch.randn(batch, N_QUERY, device="cuda")
        self.decomp, self.stepper, self.proj = graph_modules(mods, ((x, z), (x, z), (q,)))
        params = [p for m in mods for p in m.parameters()]
        self.opt = torch.optim.RAdam(params, lr=1e-3)
        self.stats = []
        self.proj.register_forward_hook(lambda m, i, o: self.stats.append(o[1].detach().std()))  # CLEAN: hook registered after graphing

    def set_framerate(self, fps):
        self.stepper_eager.dt = 1.0 / fps

    def step(self, x, z, x_next, z_next, pose, query):
        pose_hat = self.decomp(x, z)
        x1, z1 = self.stepper(x, z)
        xq, zq = self.proj(query)
        loss = (F.l1_loss(pose_hat, pose) + F.l1_loss(x1, x_next) + F.l1_loss(z1, z_next)
                + F.l1_loss(xq, x) + F.l1_loss(zq, z))
        loss.backward()
        self.opt.step()  # CLEAN: eager optimizer, outside the graphed callables
        self.opt.zero_grad(set_to_none=True)
        return loss.detach()


if __name__ == "__main__":
    tr = LMMTrainer()
    B = 1024
    def batch():
        return (torch.randn(B, N_FEAT, device="cuda"), torch.randn(B, N_LAT, device="cuda"),
                torch.randn(B, N_FEAT, device="cuda"), torch.randn(B, N_LAT, device="cuda"),
                torch.randn(B, N_POSE, device="cuda"), torch.randn(B, N_QUERY, device="cuda"))
    for it in range(20_000):
        if it == 10_000:
            tr.set_framerate(30)          # switch to the 30 Hz mocap set
        tr.step(*batch())
