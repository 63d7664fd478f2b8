"""Power trading desk: day-ahead hourly price quantiles for the auction bidding model.

Models live in the desk's model zoo and are built by name.  Training graphs the three
sub-networks (NWP weather encoder, residual-load scenario encoder, quantile decoder) together
with torch.cuda.make_graphed_callables.
"""
import numpy as np
import torch
import torch.nn as nn

MODEL_ZOO = {}
SPREAD_LOG = []


def zoo(name):
    def deco(fn):
        MODEL_ZOO[name] = fn
        return fn
    return deco


class WeatherEncoder(nn.Module):
    def __init__(self, n_grid=64, hid=128, noise_std=0.05):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(n_grid, hid, 3, padding=1), nn.GELU())
        self.noise_std = noise_std

    def forward(self, nwp):  # [B, grid points, 24 h]
        jitter = np.random.normal(0.0, self.noise_std, size=tuple(nwp.shape[1:])).astype(np.float32)  # HAZARD: host-code
        return self.conv(nwp + torch.from_numpy(jitter).to(nwp.device))


class LoadScenarioEncoder(nn.Module):
    def __init__(self, n_feat=6, hid=128, n_scen=16):
        super().__init__()
        self.gru = nn.GRU(n_feat, hid, batch_first=True)
        self.n_scen = n_scen
        self.scen_gen = torch.Generator(device="cuda")
        self.scen_gen.manual_seed(2024)

    def forward(self, load):  # [B, 24, n_feat]: load, wind and solar forecasts, ...
        eps = torch.randn((self.n_scen, *load.shape), device=load.device, generator=self.scen_gen)  # HAZARD: rng
        out, _ = self.gru((load.unsqueeze(0) * (1 + 0.03 * eps)).flatten(0, 1))
        return out.view(self.n_scen, -1, *out.shape[1:]).mean(0).transpose(1, 2)  # [B, hid, 24]


class QuantileDecoder(nn.Module):
    def __init__(self, hid=128, quantiles=(0.05, 0.25, 0.5, 0.75, 0.95), price_cap=4000.0):
        super().__init__()
        self.register_buffer("q", torch.tensor(quantiles))
        self.head = nn.Conv1d(2 * hid, len(quantiles), 1)
        self.price_cap = price_cap

    def forward(self, w, l):
        prices = self.head(torch.cat([w, l], dim=1))  # [B, Q, 24]
        prices = torch.where(prices > self.price_cap, self.price_cap, prices)  # CLEAN: device-side cap, static shape
        spikes = (prices[:, -1] > 0.5 * self.price_cap).nonzero()  # HAZARD: dynamic-shape
        self.spike_hours = spikes[:, 1]  # read by the desk's risk report
        return prices


@zoo("dayahead_v3")
def build_dayahead_v3():
    return nn.ModuleDict({"weather": WeatherEncoder(), "load": LoadScenarioEncoder(),
                          "decoder": QuantileDecoder()}).cuda()


def pinball(pred, y, q):
    diff = y.unsqueeze(1) - pred
    q = q.view(1, -1, 1)
    return torch.maximum(q * diff, (q - 1) * diff).mean()


def log_spread(module, inputs, out):
    SPREAD_LOG.append((out[:, -1] - out[:, 0]).detach().mean())


def train(name, loader, batch=64, epochs=30):
    m = MODEL_ZOO[name]()
    nwp = torch.randn(batch, 64, 24, device="cuda")
    load = torch.randn(batch, 24, 6, device="cuda")
    w = torch.randn(batch, 128, 24, device="cuda", requires_grad=True)
    l = torch.randn(batch, 128, 24, device="cuda", requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        weather, load_enc, decoder = torch.cuda.make_graphed_callables(
            (m["weather"], m["load"], m["decoder"]), ((nwp,), (load,), (w, l)))
    decoder.register_forward_hook(log_spread)  # CLEAN: hook registered after graphing
    opt = torch.optim.Adam(m.parameters(), lr=3e-4)
    for _ in range(epochs):
        for x_nwp, x_load, y in loader:
            pred = decoder(weather(x_nwp), load_enc(x_load))  # CLEAN: positional calls, in capture order
            loss = pinball(pred.float(), y, m["decoder"].q)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return m
