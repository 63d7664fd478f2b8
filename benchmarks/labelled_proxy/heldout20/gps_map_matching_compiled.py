"""Ride-hailing maps: learned map matching of driver GPS traces (snaps pings to road segments
for fare audits and ETA training data).  `install()` swaps the module-level steps for
compiled versions when the matching service starts.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

CITY_CFG = {"emission_sigma_m": 8.0}


class SegmentScorer(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.ping = nn.Linear(4, d)
        self.seg = nn.Linear(6, d)
        self.trans = nn.GRU(d, d, batch_first=True)

    def forward(self, pings, cand):  # pings [B, T, 4], cand [B, T, K, 6]
        h, _ = self.trans(self.ping(pings))
        return torch.einsum("btd,btkd->btk", h, self.seg(cand))


def smooth(pings):
    return F.avg_pool1d(pings.transpose(1, 2), 3, 1, 1, count_include_pad=False).transpose(1, 2)


def match_step(model, pings, cand, dist_m):
    sigma = CITY_CFG["emission_sigma_m"]  # HAZARD: python-scalar
    logits = model(pings, cand) - 0.5 * (dist_m / sigma) ** 2
    best = logits.argmax(-1)
    idx = best[..., None, None].expand(-1, -1, 1, cand.shape[-1])
    matched = cand.gather(2, idx).squeeze(2)  # CLEAN: gather with a CUDA index tensor
    return best, matched


def segment_ids(best, seg_table):
    ids = seg_table.gather(-1, best.unsqueeze(-1)).squeeze(-1)
    return ids, ids.tolist()  # HAZARD: host-sync


def install(mode="max-autotune"):
    global smooth, match_step, segment_ids
    smooth = torch.compile(smooth, mode=mode)
    match_step = torch.compile(match_step, mode=mode)
    segment_ids = torch.compile(segment_ids, mode=mode)


def set_city(cfg: dict):
    CITY_CFG.update(cfg)  # per-city GPS noise, e.g. 15 m in dense downtown cores


class MapMatcher:
    def __init__(self, model, pad_to=256):
        self.model = model.cuda().eval()
        self.pad_to = pad_to

    def _pad(self, t):
        return F.pad(t, [0, 0] * (t.dim() - 2) + [0, self.pad_to - t.shape[1]])

    @torch.no_grad()
    def match_trip(self, pings, cand, dist_m, seg_table):
        pings, cand, dist_m, seg_table = (self._pad(t) for t in (pings, cand, dist_m, seg_table))  # CLEAN: padded to a fixed 256-ping window
        for _ in range(2):
            pings = smooth(pings)  # HAZARD: static-address
        best, _ = match_step(self.model, pings.clone(), cand, dist_m)  # CLEAN: smoothed pings cloned before the hand-over
        return segment_ids(best.clone(), seg_table)  # CLEAN: match output cloned before the next compiled call

    @torch.no_grad()
    def match_live(self, pings, cand, dist_m):
        # live tracking: each request carries the pings received since the last call (3..60)
        best, matched = match_step(self.model, pings, cand, dist_m)  # HAZARD: dynamic-shape
        return matched.clone()


def run_service(model, trips, city_cfgs: dict):
    """One matcher process serves the trips of a whole region (several cities)."""
    install()
    matcher = MapMatcher(model)
    for trip in trips:
        set_city(city_cfgs[trip["city"]])
        ids, id_list = matcher.match_trip(trip["pings"], trip["cand"], trip["dist"], trip["seg"])
        yield trip["trip_id"], id_list
