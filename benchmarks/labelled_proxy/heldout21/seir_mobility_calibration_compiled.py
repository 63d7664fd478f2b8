"""Neural SEIR for a regional health authority: a small MLP maps daily mobility covariates to
the transmission rate beta(t); the compartments are integrated day by day and fitted to
reported cases (Poisson likelihood). Weekly re-calibration on an expanding window, then a
28-day scenario forecast. `rcompile` is the project-wide reduce-overhead shortcut.
"""
import functools
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("seir")
rcompile = functools.partial(torch.compile, mode="reduce-overhead")
SIGMA, GAMMA, POP = 1 / 5.2, 1 / 10.0, 10.0e6


class BetaNet(nn.Module):
    def __init__(self, n_cov=6):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_cov, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, cov):                        # (T, n_cov) -> (T,)
        return F.softplus(self.net(cov)).squeeze(-1)


def seir_update(state, beta):
    S, E, I, R = state.unbind(-1)
    new_inf = beta * S * I / POP
    nxt = torch.stack([S - new_inf, E + new_inf - SIGMA * E, I + SIGMA * E - GAMMA * I, R + GAMMA * I], -1)
    return nxt, SIGMA * E


def simulate(model, cov, init):
    beta = model(cov)
    state, incid = init, []
    for t in range(cov.shape[0]):
        state, inc = seir_update(state, beta[t])
        incid.append(inc)
    return torch.stack(incid), state, beta


@rcompile
def fit_loss(model, cov, cases, init):
    incid, state, beta = simulate(model, cov, init)
    S = state[..., 0]
    if (S < 0).any():  # HAZARD: dynamic-control-flow
        raise ValueError("susceptible pool went negative, beta(t) exploded")
    log.info("R_eff on the last day: %s", beta[-1] / GAMMA * S / POP)  # HAZARD: host-code
    return F.poisson_nll_loss(incid, cases, log_input=False)


@rcompile
def seir_day(state, beta):
    return seir_update(state, beta)


preview = torch.compile(simulate)


def weekly_calibration(cov, cases, init, weeks):
    model = BetaNet(cov.shape[1]).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    for w in range(weeks):
        T = 56 + 7 * w                                   # expanding window: 8 weeks, then +1 per week
        for it in range(300):
            loss = fit_loss(model, cov[:T], cases[:T], init)  # HAZARD: dynamic-shape
            if it == 299:
                print(f"week {w}: poisson nll {loss.item():.3f}")  # CLEAN: read before backward, eager code
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model


@torch.no_grad()
def forecast(model, last_state, cov_future):
    beta = model(cov_future)
    state, out = last_state, []
    for t in range(cov_future.shape[0]):
        state, inc = seir_day(state, beta[t])  # HAZARD: static-address
        out.append(inc.clone())  # CLEAN: incidence cloned before the next call
    return torch.stack(out)


if __name__ == "__main__":
    from region_data import load_region, mobility_scenarios

    cov, cases, init = load_region("region_07", device="cuda")
    model = weekly_calibration(cov, cases, init, weeks=20)
    with torch.no_grad():
        _, state_T, _ = preview(model, cov, init)  # CLEAN: default torch.compile, no CUDA graphs
    for name, cov_future in mobility_scenarios(cov, horizon=28).items():
        inc = forecast(model, state_T, cov_future)
        print(name, "peak daily incidence", inc.max().item(), "total", inc.sum().item())
