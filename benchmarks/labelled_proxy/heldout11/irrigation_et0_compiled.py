"""Reference evapotranspiration (ET0) forecasting for irrigation scheduling.

A temporal CNN forecasts daily ET0 for the next 7 days from the last 30 days of weather-station
data (Tmin, Tmax, RH, wind, solar radiation, rain); crop water demand is ETc = Kc * ET0.
The trainer receives an already compiled model; inference goes through a compiled lambda.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

WINDOW, HORIZON, N_VAR = 30, 7, 6


class ET0Net(nn.Module):
    def __init__(self, hid=64, crop_coefficient=0.4):
        super().__init__()
        self.crop_coefficient = crop_coefficient                         # FAO-56 Kc, follows the growth stage
        self.tcn = nn.Sequential(nn.Conv1d(N_VAR, hid, 3, padding=2, dilation=2), nn.ReLU(),
                                 nn.Conv1d(hid, hid, 3, padding=4, dilation=4), nn.ReLU())
        self.head = nn.Linear(hid, HORIZON)

    def forward(self, wx):                                                # (B, N_VAR, T)
        et0 = F.softplus(self.head(self.tcn(wx)[..., -1]))
        kc = self.crop_coefficient  # HAZARD: python-scalar
        return et0, kc * et0


class Trainer:
    def __init__(self, compiled_model, params, lr=2e-3, compile_loss=False):
        self.model = compiled_model
        self.opt = torch.optim.AdamW(params, lr=lr)
        if compile_loss:
            self._loss = torch.compile(self._loss, mode="reduce-overhead")

    def _loss(self, wx, target):
        keep = torch.from_numpy(np.random.choice([0.0, 1.0], size=wx.shape[:2], p=[0.1, 0.9]).astype(np.float32))  # HAZARD: host-code
        et0, _ = self.model(wx * keep.to(wx.device)[..., None])
        if et0.min() < 0:  # HAZARD: dynamic-control-flow
            raise FloatingPointError("negative ET0 forecast")
        return F.huber_loss(et0, target)

    def fit(self, loader, epochs=50):
        for _ in range(epochs):
            for wx, target in loader:
                loss = self._loss(wx, target)
                loss.backward()
                self.opt.step()
                self.opt.zero_grad(set_to_none=True)


def schedule(forecast, field_capacity_mm, soil_mm):
    need = forecast.clamp_min(0.0).cumsum(-1)  # CLEAN: clamp_min instead of a host-side check
    return torch.where(soil_mm[:, None] - need < 0.5 * field_capacity_mm, need, torch.zeros_like(need))


if __name__ == "__main__":
    net = ET0Net().cuda()
    compiled = torch.compile(net, mode="reduce-overhead")
    trainer = Trainer(compiled, net.parameters(), compile_loss=True)
    stations = [(torch.rand(64, N_VAR, WINDOW, device="cuda"), torch.rand(64, HORIZON, device="cuda") * 6) for _ in range(40)]
    trainer.fit(stations, epochs=10)

    infer = torch.compile(lambda wx: net(wx)[1] * 1.0, mode="reduce-overhead")
    draft = torch.compile(lambda wx: net(wx)[1])                           # agronomist's what-if notebook
    with torch.no_grad():
        for day, (wx, _) in enumerate(stations):
            net.crop_coefficient = 0.4 + 0.02 * day                      # Kc rises through crop development
            etc = infer(wx).clone()  # CLEAN: fixed 30-day windows, output cloned
            plan = schedule(etc, 120.0, torch.full((64,), 80.0, device="cuda"))
        season = torch.rand(1, N_VAR, 45 + 7 * 12, device="cuda")
        for end in range(WINDOW, season.shape[-1], 7):
            infer(season[..., :end]).cpu()  # HAZARD: dynamic-shape
            draft(season[..., :end]).cpu()  # CLEAN: default torch.compile, no CUDA graphs
