"""Groundwater head forecasts for a municipal wellfield.

An LSTM maps daily precipitation, reference ET, river stage and temperature at
each observation well to the head over the next 30 days; the abstraction rate
of the nearest production well is an extra input. The trainer keeps a
reduce-overhead compiled model and a compiled optimizer step.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_IN, WINDOW, HORIZON = 4, 365, 30


class HeadLSTM(nn.Module):
    def __init__(self, hidden=96):
        super().__init__()
        self.pump_rate = 0.0                              # m3/day of the nearest production well
        self.lstm = nn.LSTM(N_IN + 1, hidden, num_layers=2, batch_first=True, dropout=0.1)
        self.head = nn.Linear(hidden, HORIZON)

    def forward(self, x):
        q = self.pump_rate / 1e4  # HAZARD: python-scalar
        x = torch.cat([x, torch.full_like(x[..., :1], q)], -1)
        y, _ = self.lstm(x)
        return self.head(y[:, -1])


class WellfieldTrainer:
    def __init__(self, model, lr=1e-3, epochs=100):
        self.model = model.cuda()
        self.fmodel = torch.compile(self.model, mode="reduce-overhead")
        self.review_model = torch.compile(self.model)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=epochs)
        self.opt_step = torch.compile(self.opt.step, mode="reduce-overhead")

    def train_epoch(self, loader):
        self.model.train()
        total = 0.0
        for x, y in loader:                               # fixed 365-day windows
            pred = self.fmodel(x.cuda(non_blocking=True))
            loss = F.mse_loss(pred, y.cuda(non_blocking=True))
            loss.backward()
            self.opt_step()
            self.opt.zero_grad(set_to_none=True)
            total += loss.detach()
        self.sched.step()  # HAZARD: optimizer
        return (total / len(loader)).item()  # CLEAN: host read outside the compiled functions

    @torch.no_grad()
    def hindcast(self, well):
        """Whole observation record of one well (length differs per well)."""
        self.model.eval()
        x = torch.from_numpy(well["forcing"]).float().cuda().unsqueeze(0)
        return self.fmodel(x)  # HAZARD: dynamic-shape

    @torch.no_grad()
    def review_hindcast(self, well):
        x = torch.from_numpy(well["forcing"]).float().cuda().unsqueeze(0)
        return self.review_model(x)  # CLEAN: default torch.compile, no CUDA graphs

    @torch.no_grad()
    def climate_scenarios(self, windows):
        """Dry / median / wet forcing years for one well, each a [1, 365, N_IN] window."""
        self.model.eval()
        runs = []
        for window in windows:
            runs.append(self.fmodel(window))  # HAZARD: static-address
        return torch.cat(runs)

    @torch.no_grad()
    def bulletin(self, wells):
        self.model.eval()
        heads = {}
        for name, (window, rate) in wells.items():         # every window padded to 365 days
            self.model.pump_rate = rate
            heads[name] = self.fmodel(window).clone()  # CLEAN: cloned before the next call
        return heads


def main(loader, wells, scenario_windows, epochs=100):
    trainer = WellfieldTrainer(HeadLSTM(), epochs=epochs)
    for epoch in range(epochs):
        mse = trainer.train_epoch(loader)
        print(f"epoch {epoch}: mse {mse:.4f}")
    heads = trainer.bulletin(wells)
    return heads, trainer.climate_scenarios(scenario_windows)
