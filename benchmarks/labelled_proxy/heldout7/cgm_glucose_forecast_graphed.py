"""30-minute glucose forecasting from CGM, pump insulin and logged carbs (T1D cohort).

A shared GRU encoder and a delta head are graphed with make_graphed_callables once,
then fine-tuned patient by patient with the patient's pump settings.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

SEQ = 24                                            # 2 h of 5-min samples
CARB_CURVE = [0.05, 0.15, 0.25, 0.25, 0.15, 0.1, 0.05]   # fraction absorbed per 5-min step


class GlucoseEncoder(nn.Module):
    def __init__(self, basal_profile, hidden=64):
        super().__init__()
        self.basal_profile = list(basal_profile)            # U/h for each hour of the day
        self.insulin_sensitivity = 50.0                     # mg/dL per U
        self.register_buffer("carb_kernel", torch.tensor(CARB_CURVE).flip(0).view(1, 1, -1))  # CLEAN: buffer built at construction
        self.gru = nn.GRU(4, hidden, num_layers=2, batch_first=True)

    def forward(self, cgm, insulin, carbs, hour):
        if torch.isnan(cgm).any():  # HAZARD: dynamic-control-flow
            cgm = torch.nan_to_num(cgm, nan=140.0)
        basal = torch.tensor(self.basal_profile, device=cgm.device)[hour]  # HAZARD: host-sync
        isf = self.insulin_sensitivity  # HAZARD: python-scalar
        iob = (insulin - basal / 12.0) * isf / 100.0
        cob = F.conv1d(F.pad(carbs.unsqueeze(1), (len(CARB_CURVE) - 1, 0)), self.carb_kernel).squeeze(1)
        phase = hour.float() * (2 * math.pi / 24)
        x = torch.stack([(cgm - 140.0) / 40.0, iob, cob / 50.0, torch.sin(phase)], -1)
        out, _ = self.gru(x)
        return out[:, -1]


class DeltaHead(nn.Module):
    def __init__(self, hidden=64, horizons=6):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(hidden + 1, 64), nn.ReLU(), nn.Linear(64, horizons))

    def forward(self, h, last_cgm):
        z = torch.cat([h, (last_cgm.unsqueeze(-1) - 140.0) / 40.0], -1)
        return last_cgm.unsqueeze(-1) + 40.0 * self.mlp(z).cumsum(-1)


def graph_models(enc, head, batch=128, device="cuda"):
    cgm = torch.full((batch, SEQ), 140.0, device=device)
    ins = torch.zeros(batch, SEQ, device=device)
    carbs = torch.zeros(batch, SEQ, device=device)
    hour = torch.zeros(batch, SEQ, dtype=torch.long, device=device)
    h = torch.zeros(batch, 64, device=device, requires_grad=True)
    return torch.cuda.make_graphed_callables((enc, head), ((cgm, ins, carbs, hour), (h, cgm[:, -1].clone())))


def masked_mse(pred, target):
    valid = ~torch.isnan(target)
    err = torch.where(valid, pred - torch.nan_to_num(target), torch.zeros_like(pred))  # CLEAN: mask with where, no branch
    return err.pow(2).sum() / valid.sum().clamp_min(1)


def personalise(enc, head, patients, epochs=5, device="cuda"):
    g_enc, g_head = graph_models(enc, head, device=device)
    opt = torch.optim.Adam(list(enc.parameters()) + list(head.parameters()), lr=1e-4)
    for patient in patients:
        enc.insulin_sensitivity = patient.isf
        for _ in range(epochs):
            for cgm, ins, carbs, hour, target in patient.loader:
                cgm, ins, carbs, hour, target = (t.to(device, non_blocking=True) for t in (cgm, ins, carbs, hour, target))
                h = g_enc(cgm, ins, carbs, hour)
                pred = g_head(h, last_cgm=cgm[:, -1])  # HAZARD: api-misuse
                loss = masked_mse(pred, target)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
    return g_enc, g_head


@torch.no_grad()
def evaluate(g_enc, g_head, loader, device="cuda"):
    errs = []
    for cgm, ins, carbs, hour, target in loader:
        cgm, ins, carbs, hour, target = (t.to(device) for t in (cgm, ins, carbs, hour, target))
        pred = g_head(g_enc(cgm, ins, carbs, hour), cgm[:, -1])  # CLEAN: positional call of the graphed callables
        errs.append(masked_mse(pred, target).sqrt())
    return torch.stack(errs).mean().item()
