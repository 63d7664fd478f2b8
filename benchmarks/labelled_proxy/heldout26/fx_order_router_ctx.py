"""FX smart order router: fill probability and expected slippage per venue for child orders.

The router receives parent orders from the execution algos, scores the 12 ECN / bank
venues with a small network (last-look rejection history, queue position, spreads), and
slices the order across the best venues. The scoring step is captured through the team's
``graph_capture`` context manager and replayed on each routing decision.
"""
import contextlib

import torch
import torch.nn as nn

VENUES, VFEAT = 12, 24


@contextlib.contextmanager
def graph_capture(graph, pool=None, warmup_fn=None):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # CLEAN: warm-up on a side stream, joined below
        for _ in range(3):
            warmup_fn()
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(graph, pool=pool, stream=torch.cuda.current_stream()):  # HAZARD: stream
        yield graph


class VenueScorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(VFEAT + 3, 64), nn.ReLU(), nn.Linear(64, 2))

    def forward(self, vf, order):
        x = torch.cat([vf, order.expand(VENUES, -1)], -1)
        fill_logit, slip = self.mlp(x).unbind(-1)
        return fill_logit.sigmoid(), slip


class Router:
    def __init__(self, dev="cuda"):
        self.dev = dev
        self.model = VenueScorer().to(dev).eval()
        self.vf = torch.zeros(VENUES, VFEAT, device=dev)
        self.order = torch.zeros(1, 3, device=dev)
        self.enabled_venues = list(range(VENUES))
        self.venue_mask = torch.ones(VENUES, device=dev)
        self.inventory_skew = 0.0
        self.tie_gen = torch.Generator(device=dev)
        self.graph = torch.cuda.CUDAGraph()

    @torch.no_grad()
    def _score(self):
        fill, slip = self.model(self.vf, self.order)
        skew = self.inventory_skew  # HAZARD: python-scalar
        utility = fill * (1.0 - slip) - skew * self.order[0, 2]
        utility = torch.where(self.venue_mask > 0, utility, torch.full_like(utility, -1e9))  # CLEAN: venue mask as a device tensor
        live = utility[self.enabled_venues]  # HAZARD: host-sync
        if not self.enabled_venues:
            live = utility
        fallback = torch.randint(0, VENUES, (1,), device=self.dev, generator=self.tie_gen)  # HAZARD: rng
        self.alloc = torch.softmax(live * 8.0, 0)
        self.fallback_venue = fallback
        return self.alloc

    def start(self):
        with graph_capture(self.graph, warmup_fn=self._score):
            self._score()

    def route(self, venue_feats, side, qty, urgency):
        self.vf.copy_(venue_feats)
        self.order.copy_(torch.tensor([[side, qty, urgency]], device=self.dev))  # CLEAN: eager upload, outside the capture
        self.graph.replay()
        return self.alloc.cpu().numpy()  # CLEAN: read after replay

    def on_venue_status(self, venue, up):
        self.venue_mask[venue] = 1.0 if up else 0.0  # CLEAN: in-place write to a captured tensor
        self.enabled_venues = [v for v in range(VENUES) if self.venue_mask[v] > 0]

    def on_position(self, net_position_musd):
        self.inventory_skew = max(-1.0, min(1.0, net_position_musd / 50.0))


def slice_order(router, parent, venue_feats):
    alloc = router.route(venue_feats, parent.side, parent.qty / 1e6, parent.urgency)
    return [(v, parent.qty * a) for v, a in enumerate(alloc) if a > 0.05]
