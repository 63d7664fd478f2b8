"""Fault diagnosis of power transformers from dissolved-gas analysis (DGA) of the insulating oil.

Seven gas concentrations (H2, CH4, C2H6, C2H4, C2H2, CO, CO2) plus oil temperature and load go
through ratio features (Rogers / Duval-like) and an MLP that predicts the IEC 60599 fault class
(PD, D1, D2, T1, T2, T3, normal). Training closures are compiled with triton.cudagraphs on.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CG = {"triton.cudagraphs": True}
NO_CG = {"triton.cudagraphs": False}
N_CLS = 7


class DGANet(nn.Module):
    def __init__(self, hid=128):
        super().__init__()
        self.register_buffer("ratio_ref", torch.ones(6))                 # fleet median ratios, per utility
        self.mlp = nn.Sequential(nn.Linear(9 + 6, hid), nn.SiLU(), nn.Linear(hid, hid), nn.SiLU(), nn.Linear(hid, N_CLS))

    def forward(self, gases, aux):
        g = torch.log1p(gases.clamp_min(0))
        h2, ch4, c2h6, c2h4, c2h2, co, co2 = gases.clamp_min(1e-2).unbind(-1)
        ratios = torch.stack([ch4 / h2, c2h2 / c2h4, c2h4 / c2h6, co2 / co, c2h2 / ch4, c2h4 / ch4], -1)
        r = torch.log(ratios / self.ratio_ref)
        return self.mlp(torch.cat([g, aux, r], -1))


def build_steps(model, opt):
    @torch.compile(options=CG)
    def train_step(gases, aux, y):
        scale = torch.from_numpy(np.random.lognormal(0.0, 0.1, size=7).astype(np.float32)).cuda()  # HAZARD: host-code
        logits = model(gases * scale, aux)
        loss = F.cross_entropy(logits, y, label_smoothing=0.05)
        loss.backward()
        return loss.detach()

    @torch.compile(options=CG)
    def fleet_summary(gases, aux):
        fault = model(gases, aux).argmax(-1) != N_CLS - 1
        return int(fault.sum()), fault.float().mean()  # HAZARD: host-sync

    step = torch.compile(opt.step, options=CG)
    return train_step, fleet_summary, step


def train(model, loader, epochs=60):
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-2)
    train_step, fleet_summary, step = build_steps(model, opt)
    for epoch in range(epochs):
        if epoch == 40:
            for g in opt.param_groups:
                g["weight_decay"] = 0.0  # HAZARD: optimizer
        for gases, aux, y in loader:
            lab = torch.from_numpy(np.random.normal(1.0, 0.03, size=(1, 7)).astype(np.float32)).cuda()  # CLEAN: NumPy jitter in eager code, outside the compiled step
            train_step(gases * lab, aux, y)
            step()
            opt.zero_grad(set_to_none=True)
    return fleet_summary


def recalibrate(model, utility_ratios):
    model.ratio_ref = torch.as_tensor(utility_ratios, dtype=torch.float32, device="cuda")  # HAZARD: static-address


def recalibrate_inplace(model, utility_ratios):
    model.ratio_ref.copy_(torch.as_tensor(utility_ratios, dtype=torch.float32))  # CLEAN: buffer updated in place, same address


def audit(model, gases, aux):
    eager_like = torch.compile(model, options=NO_CG)  # CLEAN: compiled with triton.cudagraphs off
    with torch.no_grad():
        return eager_like(gases, aux).softmax(-1).cpu()


if __name__ == "__main__":
    model = DGANet().cuda()
    data = [(torch.rand(256, 7, device="cuda") * 500, torch.rand(256, 2, device="cuda"),
             torch.randint(0, N_CLS, (256,), device="cuda")) for _ in range(20)]
    summary = train(model, data, epochs=50)
    with torch.no_grad():
        n_fault, frac = summary(data[0][0], data[0][1])
        recalibrate(model, np.full(6, 1.1))
        n_fault, frac = summary(data[1][0], data[1][1])
    recalibrate_inplace(model, np.full(6, 1.05))
    report = audit(model, data[2][0], data[2][1])
