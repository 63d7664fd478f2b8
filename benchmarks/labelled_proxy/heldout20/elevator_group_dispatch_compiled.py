"""Smart buildings: elevator group-control dispatcher (assigns hall calls to cars) for a
40-floor office tower.  Events from the building bus are dispatched by type; the deployed
controller compiles the base class's `_assign` step in its constructor.
"""
import random

import torch
import torch.nn as nn


class DispatchPolicy(nn.Module):
    def __init__(self, hid=128):
        super().__init__()
        self.car_enc = nn.Linear(6, hid)   # floor, direction, load, door state, queue, at-lobby
        self.call_enc = nn.Linear(3, hid)  # floor, direction, waiting time
        self.score = nn.Bilinear(hid, hid, 1)

    def forward(self, cars, calls):  # cars [C, 6], calls [N, 3] (N = 2 * floors, fixed slots)
        c = self.car_enc(cars).unsqueeze(0).expand(calls.shape[0], -1, -1)
        h = self.call_enc(calls).unsqueeze(1).expand_as(c)
        return self.score(h.contiguous(), c.contiguous()).squeeze(-1)  # [N, C]


class GroupController:
    def __init__(self, policy, explore=0.02):
        self.policy = policy.cuda().eval()
        self.explore = explore
        self.lobby_bias = 0.0  # from the building schedule: high in up-peak, zero at night
        self.trace = []

    @torch.no_grad()
    def _assign(self, cars, calls, active):
        scores = self.policy(cars, calls)
        bias = self.lobby_bias  # HAZARD: python-scalar
        scores = scores + bias * cars[:, 5].unsqueeze(0)
        if random.random() < self.explore:  # HAZARD: host-code
            scores = scores + torch.randn_like(scores)
        cost = torch.where(active.unsqueeze(1), -scores, torch.full_like(scores, float("inf")))  # CLEAN: inactive call slots masked on the device
        if active.any():  # HAZARD: dynamic-control-flow
            return cost.argmin(-1)
        return torch.full((calls.shape[0],), -1, device=calls.device, dtype=torch.long)

    def on_hall_call(self, evt):
        return self._assign(evt["cars"], evt["calls"], evt["active"])

    def on_schedule(self, evt):
        self.lobby_bias = float(evt["lobby_bias"])

    def handle(self, evt):
        return getattr(self, f"on_{evt['type']}")(evt)


class DeployedController(GroupController):
    def __init__(self, policy, **kw):
        super().__init__(policy, **kw)
        self._assign = torch.compile(self._assign, mode="reduce-overhead")

    def on_hall_call(self, evt):
        assignment = super().on_hall_call(evt)
        self.trace.append(assignment)  # HAZARD: static-address
        return assignment.clone()  # CLEAN: the bus gets its own copy


class SimulatorController(GroupController):
    """Offline traffic simulator: eager policy, used for what-if studies."""

    def on_hall_call(self, evt):
        assignment = super().on_hall_call(evt)
        self.trace.append(assignment)  # CLEAN: eager result, nothing reuses its memory
        return assignment


def run_bus(controller: GroupController, bus):
    for evt in bus:
        out = controller.handle(evt)
        if out is not None:
            yield evt["seq"], out.cpu()


def dump_trace(controller: GroupController):
    return torch.stack(controller.trace).cpu() if controller.trace else None
