"""Surrogate for computational homogenisation: voxelised two-phase RVE (32^3) -> 21 entries
of the effective stiffness (Voigt, upper triangle). Labels come from the FFT solver in
`make_dataset.py`.

`train_eager` is the original loop; `Trainer` is the torch.compile version added when the
dataset grew to 200k RVEs. Loss and optimizer step are compiled with max-autotune.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class RVENet(nn.Module):
    def __init__(self, c_ref):
        super().__init__()
        self.register_buffer("c_ref", c_ref)             # per-entry scale of the label set (GPa)
        ch, layers = [1, 16, 32, 64, 128], []
        for a, b in zip(ch[:-1], ch[1:]):
            layers += [nn.Conv3d(a, b, 3, padding=1, padding_mode="circular"), nn.BatchNorm3d(b), nn.SiLU(), nn.MaxPool3d(2)]
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(128 * 8, 256), nn.SiLU(), nn.Linear(256, 21))

    def forward(self, vox):
        return self.head(self.features(vox)) * self.c_ref


def train_eager(model, loader, epochs, lr=3e-4):
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    for _ in range(epochs):
        for vox, target, bounds in loader:
            loss = F.mse_loss(model(vox.cuda()) / model.c_ref, target.cuda() / model.c_ref)
            opt.zero_grad()
            loss.backward()
            opt.step()


class Trainer:
    def __init__(self, model, lr=3e-4):
        self.model = model
        self.base_lr = lr
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
        self.phys_weight = 0.0
        self.loss_fn = torch.compile(self._loss, mode="max-autotune")
        self.opt_step = torch.compile(self.opt.step, mode="max-autotune")
        self.rel_err = torch.compile(self._rel_err, mode="max-autotune-no-cudagraphs")

    def _loss(self, vox, target, bounds):
        pred = self.model(vox)
        data = F.mse_loss(pred / self.model.c_ref, target / self.model.c_ref)
        c11 = pred[:, 0]
        # C11 must lie between the Reuss (lower) and Voigt (upper) bound of the phase mix
        phys = F.relu(c11 - bounds[:, 1]).mean() + F.relu(bounds[:, 0] - c11).mean()
        w = self.phys_weight  # HAZARD: python-scalar
        loss = data + w * phys
        if torch.isnan(loss):  # HAZARD: dynamic-control-flow
            raise FloatingPointError("NaN loss, check the voxel normalisation")
        return loss

    @torch.no_grad()
    def _rel_err(self, vox, target):
        err = ((self.model(vox) - target).norm(dim=1) / target.norm(dim=1)).mean()
        return err.item()  # CLEAN: compiled without CUDA graphs

    def fit(self, loader, epochs):
        for ep in range(epochs):
            self.phys_weight = min(1.0, ep / 10)          # physics term warm-up
            for g in self.opt.param_groups:
                g["lr"] = self.base_lr * 0.5 * (1 + math.cos(math.pi * ep / epochs))  # HAZARD: optimizer
            total, n = 0.0, 0
            for vox, target, bounds in loader:           # drop_last=True, batch 64
                vox, target, bounds = (t.cuda(non_blocking=True) for t in (vox, target, bounds))  # CLEAN: uploads in eager code before the compiled call
                loss = self.loss_fn(vox, target, bounds)
                total += loss.item()  # CLEAN: read before backward and before the compiled step
                n += 1
                loss.backward()
                self.opt_step()
                self.opt.zero_grad(set_to_none=True)
            print(f"epoch {ep}: train {total / n:.4f}")

    def evaluate(self, loader):
        self.model.eval()
        errs = [self.rel_err(v.cuda(), t.cuda()) for v, t, _ in loader]
        self.model.train()
        return sum(errs) / len(errs)


if __name__ == "__main__":
    from rve_data import make_loader

    model = RVENet(torch.load("scale_glass_epoxy.pt").cuda()).cuda()
    tr = Trainer(model)
    tr.fit(make_loader("rve_glass_epoxy.h5", batch=64, drop_last=True), epochs=30)
    print("glass/epoxy rel. err", tr.evaluate(make_loader("rve_glass_epoxy_test.h5", batch=256)))
    # transfer to carbon/epoxy: rescale the outputs to the new label set, then fine-tune
    model.c_ref = torch.load("scale_carbon_epoxy.pt").cuda()  # HAZARD: static-address
    tr.fit(make_loader("rve_carbon_epoxy.h5", batch=64, drop_last=True), epochs=10)
