"""Blade icing detection for a Nordic wind farm from 10-minute SCADA data.

Six-hour windows of wind speed, active power, pitch angle, rotor speed, nacelle
and ambient temperature, humidity and the power-curve deficit are classified as
iced / not iced. The loss and the optimizer step are closures compiled with
options={"triton.cudagraphs": True}; validation uses a default compile.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CG = {"triton.cudagraphs": True}
N_CH, WIN = 8, 36


class IcingNet(nn.Module):
    def __init__(self, ch=64):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(N_CH, ch, 5, padding=2), nn.GELU(),
            nn.Conv1d(ch, ch, 5, padding=2), nn.GELU(),
            nn.AdaptiveMaxPool1d(1), nn.Flatten(),
        )
        self.out = nn.Linear(ch, 1)

    def forward(self, x):
        return self.out(self.conv(x)).squeeze(-1)


def build_steps(model, opt):
    @torch.compile(options=CG)
    def loss_step(x, y):
        gain = float(np.random.uniform(0.97, 1.03))  # HAZARD: host-code
        logits = model(x * gain)                            # anemometer calibration jitter
        bce = F.binary_cross_entropy_with_logits(logits, y, weight=1.0 + 5.0 * y)
        hard_neg = torch.where(y < 0.5, logits, torch.full_like(logits, -1e4)).topk(16).values  # CLEAN: fixed-shape hard-negative mining
        pos = logits[y > 0.5]  # HAZARD: dynamic-shape
        rank = F.softplus(hard_neg.mean() - pos.mean())
        if torch.isnan(rank):  # HAZARD: dynamic-control-flow
            rank = torch.zeros_like(bce)
        return bce + 0.2 * rank

    @torch.compile(options=CG)
    def opt_step():
        opt.step()

    return loss_step, opt_step


def build_validation(model):
    @torch.compile
    def val_step(x):
        prob = torch.sigmoid(model(x))
        flagged = torch.nonzero(prob > 0.5).flatten().tolist()  # CLEAN: default torch.compile, no CUDA graphs
        return prob, flagged
    return val_step


def train(train_loader, val_loader, epochs=80):
    model = IcingNet().cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=20, gamma=0.5)
    loss_step, opt_step = build_steps(model, opt)
    val_step = build_validation(model)
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            loss = loss_step(x.cuda(non_blocking=True), y.cuda(non_blocking=True).float())
            loss.backward()
            opt_step()
            opt.zero_grad(set_to_none=True)
        sched.step()  # HAZARD: optimizer
        model.eval()
        tp = fp = fn = 0
        with torch.no_grad():
            for x, y in val_loader:
                prob, _ = val_step(x.cuda())
                pred = prob.cpu() > 0.5
                tp += int((pred & (y > 0.5)).sum())
                fp += int((pred & (y < 0.5)).sum())
                fn += int((~pred & (y > 0.5)).sum())
        print(f"epoch {epoch}: precision {tp / max(tp + fp, 1):.3f} recall {tp / max(tp + fn, 1):.3f}")
    return model
