"""County-level crop-yield forecasting from satellite histograms (You et al. 2017 style).

Each county-season is a stack of monthly 32-bin histograms over 9 MODIS bands plus
monthly weather. A temporal CNN produces the yield in bushels/acre. The model is
compiled with mode="max-autotune"; optimizer steps are compiled with reduce-overhead.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

BANDS, BINS, MONTHS, WEATHER, BATCH = 9, 32, 8, 6, 64


class HistCNN(nn.Module):
    def __init__(self, hidden=128, p_month_drop=0.1):
        super().__init__()
        self.p_month_drop = p_month_drop
        self.conv = nn.Sequential(
            nn.Conv2d(BANDS, 64, (3, 3), padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 128, (3, 3), stride=(1, 2), padding=1), nn.BatchNorm2d(128), nn.ReLU(),
            nn.AdaptiveAvgPool2d((MONTHS, 1)))
        self.temporal = nn.Conv1d(128 + WEATHER, hidden, 3, padding=1)
        self.head = nn.Sequential(nn.Linear(hidden, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, hist, weather):
        # hist: (B, MONTHS, BANDS, BINS) -> conv over (months, bins) with bands as channels
        if self.training:
            keep = np.random.rand(MONTHS) > self.p_month_drop  # HAZARD: host-code
            hist = hist * torch.as_tensor(keep, device=hist.device, dtype=hist.dtype).view(1, -1, 1, 1)
            weather = weather + 0.05 * torch.randn_like(weather)  # CLEAN: default-generator CUDA RNG
        z = self.conv(hist.permute(0, 2, 1, 3)).squeeze(-1)
        z = F.relu(self.temporal(torch.cat([z, weather.transpose(1, 2)], 1)))
        return self.head(z.mean(-1)).squeeze(-1)


model = HistCNN().cuda()
cmodel = torch.compile(model, mode="max-autotune")
opt = torch.optim.AdamW(model.parameters(), lr=torch.tensor(2e-3, device="cuda"), weight_decay=1e-2, capturable=True)


@torch.compile(mode="reduce-overhead")
def opt_step():
    opt.step()


def train_epoch(loader, epoch):
    model.train()
    for hist, weather, y in loader:
        pred = cmodel(hist, weather)  # CLEAN: drop_last=True keeps every batch at BATCH counties
        loss = F.huber_loss(pred, y, delta=5.0)
        loss.backward()
        opt_step()
        opt.zero_grad(set_to_none=True)
    for group in opt.param_groups:
        group["lr"].mul_(0.97)  # CLEAN: tensor LR updated in place
        group["weight_decay"] = 1e-2 * (0.5 ** (epoch // 10))  # HAZARD: optimizer


def finetune_head(state_loader, epochs=20):
    """Adapt the regression head to a new state with a few seasons of county data."""
    head_opt = torch.optim.SGD(model.head.parameters(), lr=0.01, momentum=0.9)
    head_step = torch.compile(head_opt.step, mode="reduce-overhead")
    sched = torch.optim.lr_scheduler.StepLR(head_opt, step_size=5, gamma=0.5)
    for _ in range(epochs):
        for hist, weather, y in state_loader:
            loss = F.mse_loss(cmodel(hist, weather), y)
            loss.backward()
            head_step()
            head_opt.zero_grad(set_to_none=True)
        sched.step()  # HAZARD: optimizer


evaluator = torch.compile(model, mode="max-autotune-no-cudagraphs", dynamic=True)


@torch.no_grad()
def state_rmse(states):
    model.eval()
    out = {}
    for name, (hist, weather, y) in states.items():
        pred = evaluator(hist, weather)  # CLEAN: no CUDA graphs, any number of counties
        out[name] = F.mse_loss(pred, y).sqrt().item()
    return out


if __name__ == "__main__":
    def loader(n=50):
        for _ in range(n):
            yield (torch.rand(BATCH, MONTHS, BANDS, BINS, device="cuda"),
                   torch.randn(BATCH, MONTHS, WEATHER, device="cuda"), 150 + 20 * torch.randn(BATCH, device="cuda"))
    for ep in range(30):
        train_epoch(loader(), ep)
    finetune_head(loader(10))
    states = {s: (torch.rand(n, MONTHS, BANDS, BINS, device="cuda"), torch.randn(n, MONTHS, WEATHER, device="cuda"),
                  150 + 20 * torch.randn(n, device="cuda")) for s, n in (("IA", 99), ("IL", 102), ("NE", 93))}
    print(state_rmse(states))
