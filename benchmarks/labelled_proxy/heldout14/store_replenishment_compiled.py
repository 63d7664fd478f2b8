"""Store replenishment: order quantities per store x SKU from quantile demand forecasts.

Policies are registered by name. The production policy is a subclass that compiles the
base-class stages with mode="max-autotune" in its constructor; the nightly job runs the
stages by name through getattr.
"""
import logging

import torch
import torch.nn as nn

log = logging.getLogger("replenishment")
POLICIES = {}


def register(name):
    def deco(cls):
        POLICIES[name] = cls
        return cls
    return deco


class QuantileForecaster(nn.Module):
    QUANTILES = (0.5, 0.8, 0.9, 0.95, 0.99)

    def __init__(self, hist=56, d=128):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(hist + 7, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU(),
                                 nn.Linear(d, len(self.QUANTILES)))

    def forward(self, sales, calendar):            # [N, 56] daily units, [N, 7] day-of-week one-hot
        q = self.net(torch.cat([torch.log1p(sales), calendar], -1))
        return torch.expm1(torch.cumsum(q.exp(), -1).clamp(max=12.0))   # monotone in the quantile


@register("eager")
class ReplenishmentPolicy:
    def __init__(self, model, service_level=0.95, pack_size=6):
        self.model = model
        self.service_level = service_level
        self.pack_size = pack_size
        self.q_index = {q: i for i, q in enumerate(QuantileForecaster.QUANTILES)}

    def _forecast(self, sales, calendar):
        sales.clamp_(min=0)  # HAZARD: static-address
        return self.model(sales, calendar)

    def _order(self, q, on_hand, in_transit):
        target = q[:, self.q_index[self.service_level]]  # HAZARD: python-scalar
        if (on_hand < 0).any():  # HAZARD: dynamic-control-flow
            log.warning("negative on-hand in the store feed: %s", on_hand.min())  # HAZARD: host-code
        need = (target - on_hand.clamp_min(0) - in_transit).clamp_min(0)
        packs = torch.ceil(need / self.pack_size)
        return torch.where(need > 0, packs * self.pack_size, torch.zeros_like(need))  # CLEAN: torch.where keeps the shape

    def _trucks(self, orders, cube_per_unit):
        return int(torch.ceil((orders * cube_per_unit).sum() / 76.0).item())  # HAZARD: host-sync

    def run(self, stage, *args):
        return getattr(self, f"_{stage}")(*args)


@register("compiled")
class CompiledReplenishment(ReplenishmentPolicy):
    def __init__(self, model, **kw):
        super().__init__(model, **kw)
        for stage in ("_forecast", "_forecast_holdout", "_order", "_trucks"):
            setattr(self, stage, torch.compile(getattr(self, stage), mode="max-autotune"))

    def _forecast_holdout(self, sales, calendar):
        return self.model(sales.clamp(min=0), calendar)  # CLEAN: out-of-place clamp, the input is left untouched


@torch.no_grad()
def nightly(model, feed, policy_name="compiled"):
    policy = POLICIES[policy_name](model)
    plan = {}
    for category, level in (("dairy", 0.99), ("snacks", 0.9), ("household", 0.95)):
        policy.service_level = level
        # every category comes padded to the same 65,536 store x SKU rows
        sales, cal, on_hand, in_transit, cube = (t.cuda() for t in feed.category(category))
        q = policy.run("forecast", sales, cal).clone()  # CLEAN: cloned before the next compiled stage
        orders = policy.run("order", q, on_hand, in_transit).clone()  # CLEAN: cloned before the next compiled stage
        plan[category] = (orders.cpu(), policy.run("trucks", orders, cube))
    return plan


@torch.no_grad()
def backtest(model, weeks):
    policy = POLICIES["compiled"](model)
    errs = [(policy.run("forecast_holdout", s.cuda(), c.cuda())[:, 0] - y.cuda()).abs().mean().item()
            for s, c, y in weeks]
    return sum(errs) / len(errs)
