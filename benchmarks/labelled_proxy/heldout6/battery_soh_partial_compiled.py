"""Lithium-ion battery state-of-health (SOH) and remaining-useful-life (RUL) estimation.

Every charge cycle gives voltage / current / temperature curves resampled to 512 points
of the capacity axis; curves from short, interrupted charges are NaN-padded. A 1D CNN
estimates SOH; a separate head estimates RUL from the last 20 cycle summaries.
Everything is compiled through `rcompile = functools.partial(torch.compile, mode="reduce-overhead")`.
"""
import functools
import math
import torch
import torch.nn as nn

rcompile = functools.partial(torch.compile, mode="reduce-overhead")
PTS, HIST = 512, 20


class CurveCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(3, 32, 9, 2, 4), nn.GELU(), nn.Conv1d(32, 64, 9, 2, 4), nn.GELU(),
                                 nn.Conv1d(64, 64, 9, 2, 4), nn.GELU(), nn.AdaptiveAvgPool1d(1), nn.Flatten())
        self.soh = nn.Linear(64, 1)

    def forward(self, curves):
        return torch.sigmoid(self.soh(self.net(torch.nan_to_num(curves)))).squeeze(-1)


class RULHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(HIST * 4, 128), nn.ReLU(), nn.Linear(128, 1))

    def forward(self, summaries):
        return nn.functional.softplus(self.net(summaries)).squeeze(-1) * 1000.0


soh_model, rul_model = CurveCNN().cuda(), RULHead().cuda()
soh_c, rul_c = rcompile(soh_model), rcompile(rul_model)
opt = torch.optim.Adam(soh_model.parameters(), lr=1e-3)
opt_step = rcompile(opt.step)


@rcompile
def train_loss(curves, soh_true):
    valid = ~torch.isnan(curves[:, 0, -1])
    n_valid = int(valid.sum())  # HAZARD: host-sync
    pred = soh_model(curves)
    loss = ((pred - soh_true) ** 2 * valid).sum() / max(n_valid, 1)
    print("batch mse", loss)  # HAZARD: host-code
    return loss


def fit(loader, epochs=40, base_lr=1e-3):
    soh_model.train()
    steps = epochs * len(loader)
    step = 0
    for _ in range(epochs):
        for curves, soh_true in loader:  # fixed 128 cycles per batch
            loss = train_loss(curves, soh_true)  # CLEAN: curves are resampled to a fixed 512 points
            loss.backward()
            opt_step()
            opt.zero_grad(set_to_none=True)
            for group in opt.param_groups:
                group["lr"] = 0.5 * base_lr * (1 + math.cos(math.pi * step / steps))  # HAZARD: optimizer
            step += 1


@torch.no_grad()
def evaluate(cells):
    soh_model.eval()
    report = []
    for curves, summaries in cells:
        soh = soh_c(curves)
        soh_early = soh[-1].item()  # CLEAN: read before the next compiled call
        rul = rul_c(summaries)
        report.append((soh_early, soh[-1].item(), rul[-1].item()))  # HAZARD: static-address
    return report


if __name__ == "__main__":
    loader = [(torch.randn(128, 3, PTS, device="cuda"), torch.rand(128, device="cuda")) for _ in range(10)]
    fit(loader, epochs=3)
    cells = [(torch.randn(64, 3, PTS, device="cuda"), torch.randn(64, HIST, 4, device="cuda")) for _ in range(5)]
    for soh_early, soh_last, rul_last in evaluate(cells):
        print(f"SOH {soh_last:.3f}  RUL {rul_last:.0f} cycles")
