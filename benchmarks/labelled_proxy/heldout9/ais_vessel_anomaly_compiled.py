"""Maritime domain awareness: anomalous vessel tracks from AIS messages.

A GRU autoencoder reconstructs resampled tracks (lat, lon, SOG, COG, gap); high
reconstruction error flags loitering, spoofing or rendezvous behaviour. Pipeline stages are
registered by name and compiled with the cudagraphs backend when they are registered.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

STAGES = {}


def register(name, **compile_kw):
    def deco(fn):
        STAGES[name] = torch.compile(fn, **compile_kw) if compile_kw else fn
        return fn
    return deco


class TrackAE(nn.Module):
    def __init__(self, d_in=5, hidden=128):
        super().__init__()
        self.enc = nn.GRU(d_in, hidden, batch_first=True)
        self.dec = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, d_in)

    def forward(self, x):
        _, h = self.enc(x)
        z = h[-1][:, None].expand(-1, x.shape[1], -1)
        y, _ = self.dec(z)
        return self.out(y)


@register("normalize", backend="cudagraphs")
def normalize_(tracks, mu, sd):
    tracks.sub_(mu).div_(sd)  # HAZARD: static-address
    return tracks


@register("score", backend="cudagraphs")
def score(model, tracks):
    err = (model(tracks) - tracks).pow(2).mean(-1)              # B, T
    gap_h = tracks[..., 4]
    if (gap_h > 6.0).any():  # HAZARD: dynamic-control-flow
        err = err * (gap_h <= 6.0)                            # ignore dark periods
    return err.amax(-1)


@register("rank", backend="cudagraphs")
def rank(scores, mmsi, k=20):
    top = torch.topk(scores, k)  # CLEAN: fixed-k topk, static shape
    return mmsi[top.indices].tolist(), top.values  # HAZARD: host-sync


@register("screen_fixed", backend="cudagraphs")
def screen_fixed(model, tracks, valid):
    err = (model(tracks) - tracks).pow(2).mean(-1)
    return torch.where(valid, err, torch.zeros_like(err)).amax(-1)  # CLEAN: torch.where instead of a branch


@torch.no_grad()
def nightly_screen(model, tracks, mmsi, mu, sd):
    x = STAGES["normalize"](tracks, mu, sd)
    s = STAGES["score"](model, x).clone()  # CLEAN: cloned before the next compiled call
    ids, vals = STAGES["rank"](s, mmsi)
    return list(zip(ids, vals.cpu().tolist()))  # CLEAN: eager host read, before any further compiled call


@torch.no_grad()
def per_voyage(model, voyages, mu, sd):
    out = []
    for v in voyages:                                         # each voyage has its own length
        x = (v - mu) / sd
        out.append(STAGES["score"](model, x[None]).clone())  # HAZARD: dynamic-shape
    return torch.cat(out)


@torch.no_grad()
def windowed(model, voyages, mu, sd, T=256):
    x = torch.zeros(len(voyages), T, 5, device="cuda")
    valid = torch.zeros(len(voyages), T, dtype=torch.bool, device="cuda")
    for i, v in enumerate(voyages):
        n = min(T, v.shape[0])
        x[i, :n] = (v[-n:] - mu) / sd
        valid[i, :n] = True
    return STAGES["screen_fixed"](model, x, valid).clone()  # CLEAN: fixed 256-step windows, one graph


if __name__ == "__main__":
    model = TrackAE().cuda().eval()
    mu, sd = torch.zeros(5, device="cuda"), torch.ones(5, device="cuda")
    tracks = torch.randn(8192, 256, 5, device="cuda")
    mmsi = torch.randint(200_000_000, 800_000_000, (8192,), device="cuda")
    print(nightly_screen(model, tracks, mmsi, mu, sd)[:5])
    voyages = [torch.randn(int(n), 5, device="cuda") for n in torch.randint(50, 900, (64,))]
    print(per_voyage(model, voyages, mu, sd).shape, windowed(model, voyages, mu, sd).shape)
