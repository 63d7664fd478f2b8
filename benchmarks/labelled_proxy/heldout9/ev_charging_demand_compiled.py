"""Day-ahead demand forecasts for a public EV charging network (per station, 15-min slots).

The forecaster mixes a temporal convolution over the last 7 days of sessions with calendar
embeddings; the dynamic tariff shifts demand through a simple price elasticity. Forecasts
feed the grid operator's flexibility bids, one bid per tariff scenario.
"""
import functools

import torch
import torch.nn as nn

rcompile = functools.partial(torch.compile, mode="reduce-overhead")
SLOTS, DAYS = 96, 7


class DemandNet(nn.Module):
    def __init__(self, n_cal=24, c=64):
        super().__init__()
        self.tcn = nn.Sequential(
            nn.Conv1d(1, c, 9, padding=4), nn.ReLU(),
            nn.Conv1d(c, c, 9, padding=8, dilation=2), nn.ReLU(),
            nn.Conv1d(c, c, 9, padding=16, dilation=4), nn.ReLU(),
        )
        self.cal = nn.Linear(n_cal, c)
        self.out = nn.Linear(c, SLOTS)

    def forward(self, history, calendar):                      # N, DAYS*SLOTS ; N, n_cal
        h = self.tcn(history[:, None]).mean(-1)
        return torch.relu(self.out(h + self.cal(calendar)))


@rcompile
def forecast(model, history, calendar, tariff_eur_kwh):
    demand = model(history, calendar)
    active = history[:, -4 * SLOTS:].sum(-1) > 0             # used in the last four days
    n_active = int(active.sum())  # HAZARD: host-sync
    print(f"forecasting {n_active} active stations")  # HAZARD: host-code
    elasticity = 1.0 - 0.8 * (tariff_eur_kwh - 0.30)  # HAZARD: python-scalar
    return demand * elasticity * active[:, None]


@rcompile
def forecast_tensor_price(model, history, calendar, tariff):
    demand = model(history, calendar)
    active = (history[:, -4 * SLOTS:].sum(-1) > 0).float()
    return demand * (1.0 - 0.8 * (tariff - 0.30)) * active[:, None]  # CLEAN: tariff is a 0-d CUDA tensor input


@torch.no_grad()
def scenario_bids(model, history, calendar, tariffs):
    bids = []
    for eur in tariffs:
        bids.append(forecast(model, history, calendar, eur))  # HAZARD: static-address
    return torch.stack(bids).sum(1)


@torch.no_grad()
def scenario_bids_tensor(model, history, calendar, tariffs):
    price = torch.zeros((), device="cuda")
    bids = []
    for eur in tariffs:
        price.fill_(eur)  # CLEAN: in-place update of a 0-d tensor, no recompile
        bids.append(forecast_tensor_price(model, history, calendar, price).sum(0).clone())  # CLEAN: cloned before the next call
    return torch.stack(bids)


def train_step(model, opt, history, calendar, target):
    pred = model(history, calendar)                          # eager training, tiny model
    loss = nn.functional.poisson_nll_loss(pred, target, log_input=False)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()  # CLEAN: eager code, no graph involved


if __name__ == "__main__":
    model = DemandNet().cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hist = torch.rand(3200, DAYS * SLOTS, device="cuda").round()
    cal = torch.randn(3200, 24, device="cuda")
    for _ in range(200):
        train_step(model, opt, hist, cal, torch.rand(3200, SLOTS, device="cuda"))
    model.eval()
    tariffs = [0.22, 0.29, 0.35, 0.41]
    print(scenario_bids(model, hist, cal, tariffs)[:, :4])
    print(scenario_bids_tensor(model, hist, cal, tariffs)[:, :4])
