"""Non-intrusive load monitoring (NILM) for a smart-meter programme: seq2point
networks disaggregate a household's 1 Hz aggregate power into appliance traces.
Pipeline stages are registered by name and compiled with backend="cudagraphs".
"""
import torch
import torch.nn as nn

REGISTRY = {}
WIN = 599
MAINS_MEAN, MAINS_STD = 400.0, 600.0


def register(name):
    def deco(fn):
        REGISTRY[name] = fn
        return fn
    return deco


class Seq2Point(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(1, 30, 10, padding=5), nn.ReLU(), nn.Conv1d(30, 40, 8, padding=4), nn.ReLU(),
            nn.Conv1d(40, 50, 6, padding=3), nn.ReLU(), nn.AdaptiveAvgPool1d(32), nn.Flatten(),
        )
        self.fc = nn.Sequential(nn.Linear(50 * 32, 256), nn.ReLU(), nn.Linear(256, 1))

    def forward(self, w):
        return self.fc(self.conv(w)).squeeze(-1)  # midpoint appliance power (scaled)


MODELS = {name: Seq2Point().cuda().eval() for name in ("fridge", "kettle")}


@register("standardize")
def standardize_(mains):
    mains.sub_(MAINS_MEAN).div_(MAINS_STD)  # HAZARD: static-address
    return mains


@register("standardized")
def standardized(mains):
    return (mains - MAINS_MEAN) / MAINS_STD  # CLEAN: out-of-place, the input is not mutated


@register("fridge")
def fridge(windows):
    p = MODELS["fridge"](windows).relu() * 300.0
    if (p > 250.0).any():  # HAZARD: dynamic-control-flow
        p = p.clamp_max(250.0)  # compressor never draws more than this
    return p


@register("kettle")
def kettle(windows):
    p = MODELS["kettle"](windows).relu() * 3000.0
    return torch.where(p > 1500.0, p, torch.zeros_like(p))  # CLEAN: torch.where instead of a host branch


@register("events")
def on_events(p):
    return (p > 1500.0).nonzero().squeeze(-1).tolist()  # HAZARD: host-sync


def compile_all():
    for name in list(REGISTRY):
        REGISTRY[name] = torch.compile(REGISTRY[name], backend="cudagraphs")


def sliding(x):
    return x.unfold(-1, WIN, 1).unsqueeze(1).contiguous()  # (N, 1, WIN)


@torch.no_grad()
def live_update(buffer):
    """buffer: the latest WIN mains samples; always the same shape."""
    x = REGISTRY["standardized"](buffer).view(1, 1, WIN).clone()
    fridge_w = REGISTRY["fridge"](x).clone()  # CLEAN: fixed (1, 1, WIN) input, cloned before the next compiled call
    kettle_w = REGISTRY["kettle"](x).clone()
    return fridge_w, kettle_w, REGISTRY["events"](kettle_w)


@torch.no_grad()
def backfill(segment):
    """Re-run the fridge model over a gappy segment of arbitrary length after a
    meter comes back online."""
    x = REGISTRY["standardize"](segment.clone())
    p = REGISTRY["fridge"](sliding(x))  # HAZARD: dynamic-shape
    return p.clone()


if __name__ == "__main__":
    compile_all()
    buf = torch.rand(WIN, device="cuda") * 2000
    for sec in range(3600):
        buf = torch.roll(buf, -1)
        buf[-1] = torch.rand((), device="cuda") * 2000
        f, k, ev = live_update(buf)
    for gap_len in (1800, 5400, 7211):
        trace = backfill(torch.rand(gap_len + WIN - 1, device="cuda") * 2000)
        print(gap_len, trace.shape, float(trace.mean()))
