"""Surrogate for surface pressure coefficient Cp(x/c) on 2D airfoils (RANS training data).

Inputs: 200 surface points of the airfoil (x, y), Mach number and angle of attack; output Cp at
each point. Model, loss and optimizer step are compiled from a dataclass config.
"""
import logging
import math
from dataclasses import dataclass

import torch
import torch.nn as nn

log = logging.getLogger("cp_surrogate")
N_PTS = 200


@dataclass
class SurrogateConfig:
    compile_mode: str = "reduce-overhead"
    eval_mode: str = "max-autotune-no-cudagraphs"
    lr: float = 1e-3
    epochs: int = 200
    batch: int = 128


class CpNet(nn.Module):
    def __init__(self, hid=256):
        super().__init__()
        self.register_buffer("coord_mean", torch.zeros(2))
        self.register_buffer("coord_std", torch.ones(2))
        self.point = nn.Sequential(nn.Linear(2, hid), nn.GELU(), nn.Linear(hid, hid))
        self.flow = nn.Sequential(nn.Linear(2, hid), nn.GELU())
        self.out = nn.Sequential(nn.GELU(), nn.Linear(2 * hid, hid), nn.GELU(), nn.Linear(hid, 1))

    def forward(self, xy, cond):                                       # (B, N, 2), (B, 2) = Mach, AoA [rad]
        p = self.point((xy - self.coord_mean) / self.coord_std)
        g = p.max(1, keepdim=True).values + self.flow(cond)[:, None]
        return self.out(torch.cat([p, g.expand_as(p)], -1)).squeeze(-1)


def cp_loss(pred, target):
    err = (pred - target) ** 2
    loss = err.mean() + 0.1 * err[:, :20].mean()                        # weight the leading-edge points
    if torch.isnan(loss):  # HAZARD: dynamic-control-flow
        loss = torch.zeros_like(loss)                                      # drop the batch (diverged RANS case)
    log.debug("batch loss computed")  # HAZARD: host-code
    return loss


class SurrogateTrainer:
    def __init__(self, cfg: SurrogateConfig):
        self.cfg = cfg
        self.model = CpNet().cuda()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, weight_decay=1e-4)
        self.ft_lr = torch.tensor(1e-4, device="cuda")
        self.ft_opt = torch.optim.Adam(self.model.out.parameters(), lr=self.ft_lr, capturable=True)
        self.fwd = torch.compile(self.model, mode=cfg.compile_mode)
        self.loss_fn = torch.compile(cp_loss, mode=cfg.compile_mode)
        self.step = torch.compile(self.opt.step, mode=cfg.compile_mode)
        self.ft_step = torch.compile(self.ft_opt.step, mode=cfg.compile_mode)
        self.preview = torch.compile(self.model, mode=cfg.eval_mode)

    def refit_normaliser(self, all_xy):
        self.model.coord_mean = all_xy.mean((0, 1))  # HAZARD: static-address
        self.model.coord_std = all_xy.std((0, 1))

    def fit(self, loader):
        for epoch in range(self.cfg.epochs):
            for g in self.opt.param_groups:
                g["lr"] = self.cfg.lr * 0.5 * (1 + math.cos(math.pi * epoch / self.cfg.epochs))  # HAZARD: optimizer
            for xy, cond, cp in loader:
                loss = self.loss_fn(self.fwd(xy, cond), cp)
                running = loss.item()  # CLEAN: loss read before backward, while its graph output is still live
                loss.backward()
                self.step()
                self.opt.zero_grad(set_to_none=True)
            log.info("epoch %d loss %.4f", epoch, running)

    def finetune_wind_tunnel(self, loader, epochs=20):
        for epoch in range(epochs):
            self.ft_lr.fill_(1e-4 * 0.9 ** epoch)  # CLEAN: tensor learning rate updated in place
            for xy, cond, cp in loader:
                self.loss_fn(self.fwd(xy, cond), cp).backward()
                self.ft_step()
                self.ft_opt.zero_grad(set_to_none=True)

    @torch.no_grad()
    def polar(self, xy, mach, alphas):
        cond = torch.stack([torch.full_like(alphas, mach), alphas], 1)
        return self.preview(xy.expand(len(alphas), -1, -1), cond).cpu()  # CLEAN: preview compiled without CUDA graphs


if __name__ == "__main__":
    cfg = SurrogateConfig(epochs=5)
    tr = SurrogateTrainer(cfg)
    data = [(torch.rand(cfg.batch, N_PTS, 2, device="cuda"), torch.rand(cfg.batch, 2, device="cuda"),
             torch.randn(cfg.batch, N_PTS, device="cuda")) for _ in range(16)]
    tr.fit(data)
    tr.refit_normaliser(torch.cat([d[0] for d in data]))       # new airfoil families added to the database
    tr.finetune_wind_tunnel(data[:4])
    cl = tr.polar(data[0][0][:1], 0.72, torch.linspace(-0.05, 0.15, 21, device="cuda"))
