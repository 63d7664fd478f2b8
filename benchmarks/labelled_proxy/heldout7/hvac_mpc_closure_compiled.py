"""Model-predictive HVAC control for a 12-zone office building.

A grey-box thermal model (RC terms + residual MLP) is calibrated online every night;
the day-ahead planner is a random-shooting MPC built as a closure over the model and
compiled with CUDA graphs. Plans are recomputed every 15 minutes.
"""
import logging

import torch
import torch.nn as nn

log = logging.getLogger("hvac.mpc")
N_ZONES, HORIZON, N_CAND = 12, 96, 4096               # 24 h at 15 min
DT_H, P_MAX = 0.25, 8000.0                            # hours per step, W per zone


class ThermalModel(nn.Module):
    def __init__(self, n_weather=4):
        super().__init__()
        self.log_ua = nn.Parameter(torch.full((N_ZONES,), -3.0))
        self.log_gain = nn.Parameter(torch.full((N_ZONES,), -7.0))
        self.residual = nn.Sequential(nn.Linear(2 * N_ZONES + n_weather, 128), nn.Tanh(), nn.Linear(128, N_ZONES))

    def forward(self, temp, power, weather):
        t_out = weather[..., :1]
        drift = self.log_ua.exp() * (t_out - temp) + self.log_gain.exp() * power
        return temp + DT_H * drift + 0.1 * self.residual(torch.cat([temp, power / P_MAX, weather], -1))


def rollout(model, temp0, weather, u):
    temps, t = [], temp0.expand(u.shape[0], -1)
    for k in range(u.shape[1]):
        t = model(t, u[:, k], weather[k].expand(u.shape[0], -1))
        temps.append(t)
    return torch.stack(temps, 1)


def make_planner(model, comfort=(20.5, 24.0), w_comfort=10.0):
    lo, hi = comfort

    def plan(temp0, weather, occupancy, price_per_kwh):
        u = torch.rand(N_CAND, HORIZON, N_ZONES, device=temp0.device) * P_MAX
        temps = rollout(model, temp0, weather, u)
        discomfort = ((torch.relu(lo - temps) + torch.relu(temps - hi)) * occupancy).sum((1, 2))
        energy = u.sum((1, 2)) * DT_H / 1000.0 * price_per_kwh  # HAZARD: python-scalar
        best = (energy + w_comfort * discomfort).argmin()
        log.debug("MPC solved, comfort weight %.1f", w_comfort)  # HAZARD: host-code
        return u[best], temps[best]

    return torch.compile(plan, mode="reduce-overhead")


def make_tensor_price_planner(model, comfort=(20.5, 24.0)):
    lo, hi = comfort

    def plan(temp0, weather, occupancy, price_t):
        u = torch.rand(N_CAND, HORIZON, N_ZONES, device=temp0.device) * P_MAX
        temps = rollout(model, temp0, weather, u)
        discomfort = ((torch.relu(lo - temps) + torch.relu(temps - hi)) * occupancy).sum((1, 2))
        energy = u.sum((1, 2)) * DT_H / 1000.0 * price_t  # CLEAN: price is a device tensor
        best = (energy + 10.0 * discomfort).argmin()
        return u[best], temps[best]

    return torch.compile(plan, mode="reduce-overhead")


class BuildingController:
    def __init__(self, model, device="cuda"):
        self.model = model.to(device)
        self.planner = make_planner(self.model)
        self.rt_planner = make_tensor_price_planner(self.model)
        self.price_t = torch.zeros((), device=device)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.calib_step = torch.compile(self.opt.step, mode="reduce-overhead")
        self.plans, self.temp_forecasts = [], []

    @torch.no_grad()
    def every_15_min(self, zone_temps, weather_fc, occupancy_fc, tariff):
        u, temps = self.planner(zone_temps, weather_fc, occupancy_fc, tariff.current_price())
        self.plans.append(u)  # HAZARD: static-address
        self.temp_forecasts.append(temps.clone())  # CLEAN: cloned before the next planner call
        return u[0].cpu()

    @torch.no_grad()
    def on_price_signal(self, zone_temps, weather_fc, occupancy_fc, price):
        self.price_t.fill_(price)  # CLEAN: real-time price written into a device tensor
        u, _ = self.rt_planner(zone_temps, weather_fc, occupancy_fc, self.price_t)
        return u[0].cpu()

    def nightly_calibration(self, history_loader, rounds=3):
        for _ in range(rounds):
            for temp, power, weather, target in history_loader:
                pred = self.model(temp.cuda(), power.cuda(), weather.cuda())
                loss = nn.functional.mse_loss(pred, target.cuda())
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                self.calib_step()
            for group in self.opt.param_groups:
                group["lr"] *= 0.5  # HAZARD: optimizer
