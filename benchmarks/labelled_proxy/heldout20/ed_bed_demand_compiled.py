"""Hospital operations: emergency-department arrivals and inpatient bed-demand forecast for
the capacity command centre (refreshed every 15 minutes for 12 sites).
"""
import functools

import torch
import torch.nn as nn
import torch.nn.functional as F

rcompile = functools.partial(torch.compile, mode="reduce-overhead")


class ArrivalsNet(nn.Module):
    def __init__(self, n_feat=18, hid=64, horizon=24):
        super().__init__()
        self.lstm = nn.LSTM(n_feat, hid, batch_first=True)
        self.out = nn.Linear(hid, horizon)
        self.holiday_uplift = 1.0  # set by the command centre from the regional event calendar

    def forward(self, x):
        h, _ = self.lstm(x)
        uplift = self.holiday_uplift  # HAZARD: python-scalar
        return F.softplus(self.out(h[:, -1])) * uplift


class BedDemandNet(nn.Module):
    def __init__(self, horizon=24, n_units=12):
        super().__init__()
        self.admit = nn.Linear(horizon, horizon * n_units)
        self.n_units = n_units

    def forward(self, arrivals, occupancy):  # occupancy: [sites, units], fraction of staffed beds
        admits = torch.sigmoid(self.admit(arrivals)).view(-1, self.n_units, arrivals.shape[-1])
        return occupancy.unsqueeze(-1) + 0.01 * admits.cumsum(-1)


@rcompile
def forecast_arrivals(model, x):
    return model(x)


@rcompile
def forecast_beds(model, arrivals, occupancy):
    beds = model(arrivals, occupancy)
    print("projected peak occupancy", beds.amax())  # HAZARD: host-code
    if (beds > 0.95).any():  # HAZARD: dynamic-control-flow
        beds = beds.clamp(max=1.0)
    return beds


class CommandCentreForecaster:
    def __init__(self, arrivals_net, beds_net, uplift_by_day):
        self.arr = arrivals_net.cuda().eval()
        self.beds = beds_net.cuda().eval()
        self.uplift_by_day = uplift_by_day  # {date: multiplier}, e.g. 1.12 on bank holidays

    @torch.no_grad()
    def refresh(self, day, x, occupancy):
        self.arr.holiday_uplift = self.uplift_by_day.get(day, 1.0)
        arrivals = forecast_arrivals(self.arr, x)
        beds = forecast_beds(self.beds, arrivals.clone(), occupancy)  # CLEAN: hand-over cloned before the next compiled call
        total_arrivals = arrivals.sum(-1)  # HAZARD: static-address
        return {"arrivals": total_arrivals.cpu(), "beds": beds.clone().cpu()}  # CLEAN: bed forecast cloned right after its call

    @torch.no_grad()
    def backtest(self, history):
        # analysts replay past weeks with varying look-back lengths; eager on purpose
        return [self.arr(x).sum(-1).cpu() for x in history]  # CLEAN: eager module call, not compiled


def every_quarter_hour(forecaster, feed):
    for tick in feed:
        yield forecaster.refresh(tick["day"], tick["x"].cuda(), tick["occupancy"].cuda())
