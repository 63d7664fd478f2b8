"""Fuel consumption model and trim advisor for a 1,700 TEU container feeder.

A data-driven fuel-rate model (10-minute noon-report / AMS intervals) is used
to (a) estimate the fuel of each planned leg and (b) recommend the trim with the
lowest predicted consumption at the current speed and draft. The functions are
compiled through a functools.partial of torch.compile with mode="reduce-overhead".
"""
import functools

import torch
import torch.nn as nn
import torch.nn.functional as F

rcompile = functools.partial(torch.compile, mode="reduce-overhead")

# feature columns: speed through water [kn], draft fore, draft aft, trim, wind speed, rel. wind angle, wave height, current
STW, D_FWD, D_AFT, TRIM, WIND, WANG, WAVE, CURR = range(8)
N_FEAT, MAX_STEPS = 8, 288


class FuelNet(nn.Module):
    def __init__(self, width=128):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(N_FEAT, width), nn.SiLU(), nn.Linear(width, width), nn.SiLU(), nn.Linear(width, 1))

    def forward(self, x):
        return F.softplus(self.mlp(x)).squeeze(-1)          # t/h


class TrimAdvisor:
    def __init__(self, model):
        self.model = model.cuda().eval()
        self.beaufort = 4.0                                  # from the weather-routing service, per voyage
        self.trims = torch.linspace(-1.5, 1.5, 31, device="cuda")  # CLEAN: candidate grid built once, outside compiled code
        self.leg_fuel = rcompile(self._leg_fuel)
        self.advise = rcompile(self._advise)

    def _leg_fuel(self, leg, mask):
        speed = leg[..., STW:STW + 1] * 0.514444  # CLEAN: out-of-place unit conversion (knots to m/s)
        x = torch.cat([speed, leg[..., STW + 1:]], -1)
        return (self.model(x) * mask).sum() / 6.0

    def _advise(self, state):
        state[:, STW].mul_(0.514444)  # HAZARD: static-address
        sea = self.beaufort  # HAZARD: python-scalar
        cand = state.repeat(self.trims.shape[0], 1)
        cand[:, TRIM] = self.trims
        cand[:, WAVE] = 0.0248 * sea ** 2
        fuel = self.model(cand)
        best = int(fuel.argmin())  # HAZARD: host-sync
        return self.trims[best], fuel

    @torch.no_grad()
    def plan_voyage(self, legs, weather):
        self.beaufort = weather["beaufort"]
        total = 0.0
        for leg in legs:                                     # each leg has its own number of intervals
            leg_t = torch.as_tensor(leg, device="cuda")
            total += self.leg_fuel(leg_t, torch.ones(leg_t.shape[0], device="cuda")).item()  # HAZARD: dynamic-shape
        return total

    @torch.no_grad()
    def plan_voyage_padded(self, legs):
        total = torch.zeros((), device="cuda")
        for leg in legs:
            x = torch.zeros(MAX_STEPS, N_FEAT, device="cuda")
            mask = torch.zeros(MAX_STEPS, device="cuda")
            x[: len(leg)] = torch.as_tensor(leg, device="cuda")
            mask[: len(leg)] = 1.0
            total += self.leg_fuel(x, mask)  # CLEAN: every leg padded to MAX_STEPS
        return total.item()

    @torch.no_grad()
    def recommend(self, state_row):
        trim, fuel = self.advise(torch.as_tensor(state_row, device="cuda").unsqueeze(0))
        return float(trim), fuel.min().item()
