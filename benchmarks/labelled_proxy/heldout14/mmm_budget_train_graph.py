"""Neural marketing-mix model for a DTC brand: weekly sales from channel spend per geo.

Adstock (geometric carry-over as a grouped conv) + Hill saturation per channel, plus a
small control network (price, promo, seasonality). The full training step is captured.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CHANNELS = ("search", "social", "tv", "ooh", "affiliate", "email")
LAGS = 8


class NeuralMMM(nn.Module):
    def __init__(self, n_ch=len(CHANNELS), n_ctrl=4):
        super().__init__()
        self.decay_logit = nn.Parameter(torch.zeros(n_ch))
        self.hill_k = nn.Parameter(torch.ones(n_ch))
        self.hill_s = nn.Parameter(torch.ones(n_ch))
        self.beta = nn.Parameter(torch.full((n_ch,), 0.1))
        self.ctrl = nn.Sequential(nn.Linear(n_ctrl, 32), nn.Tanh(), nn.Linear(32, 1))
        self.register_buffer("channel_prior", torch.ones(n_ch))
        self.register_buffer("lags", torch.arange(LAGS, dtype=torch.float32))

    def forward(self, spend, ctrl):                 # spend [G, T, C], ctrl [G, T, n_ctrl]
        w = torch.sigmoid(self.decay_logit)[:, None] ** self.lags
        w = w / w.sum(1, keepdim=True)
        x = F.pad(spend.transpose(1, 2), (LAGS - 1, 0))
        ad = F.conv1d(x, w.flip(1)[:, None], groups=spend.shape[-1]) + 1e-6
        s, k = self.hill_s[:, None], self.hill_k[:, None].abs() + 1e-3
        sat = ad ** s / (ad ** s + k ** s)
        contrib = (self.beta * self.channel_prior)[:, None] * sat
        return contrib.sum(1) + self.ctrl(ctrl).squeeze(-1)


class MMMTrainer:
    def __init__(self, model, geos=64, weeks=104, device="cuda"):
        self.model = model.to(device)
        self.opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        self.spend = torch.zeros(geos, weeks, len(CHANNELS), device=device)
        self.ctrl = torch.zeros(geos, weeks, 4, device=device)
        self.sales = torch.zeros(geos, weeks, device=device)
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        lam = np.random.beta(0.4, 0.4)  # HAZARD: host-code
        perm = torch.randperm(self.spend.shape[0], device=self.spend.device)  # CLEAN: randperm on the device is capturable
        spend = lam * self.spend + (1 - lam) * self.spend[perm]
        ctrl = lam * self.ctrl + (1 - lam) * self.ctrl[perm]
        sales = lam * self.sales + (1 - lam) * self.sales[perm]
        loss = F.mse_loss(self.model(spend, ctrl), sales)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)  # CLEAN: clip_grad_norm_ stays on the device
        self.opt.step()  # HAZARD: optimizer
        return loss.detach()

    def capture(self, warmup=3):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            with torch.cuda.stream(s):
                for _ in range(warmup):
                    self.opt.zero_grad(set_to_none=True)
                    self._step()
            torch.cuda.current_stream().wait_stream(s)
            self.opt.zero_grad(set_to_none=True)
            with torch.cuda.graph(self.graph):
                self.loss = self._step()

    def load_panel(self, spend, ctrl, sales):
        self.spend.copy_(spend)  # CLEAN: copy_ into the static input
        self.ctrl.copy_(ctrl)
        self.sales.copy_(sales)

    def refresh_prior(self, lift_tests):
        # geo-lift experiments re-calibrate the per-channel prior every quarter
        prior = torch.as_tensor(lift_tests, dtype=torch.float32, device="cuda")  # CLEAN: upload outside the capture
        self.model.channel_prior = prior / prior.mean()  # HAZARD: static-address

    def fit(self, panels, quarters, steps_per_quarter=500):
        self.load_panel(*panels[0][:3])
        self.capture()
        for q in range(quarters):
            self.refresh_prior(panels[q][3] if len(panels[q]) > 3 else np.ones(len(CHANNELS)))
            self.load_panel(*panels[q][:3])
            for _ in range(steps_per_quarter):
                self.graph.replay()
        return self.loss.item()
