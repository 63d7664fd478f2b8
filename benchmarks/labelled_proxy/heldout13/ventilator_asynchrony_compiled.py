"""Patient-ventilator asynchrony detection in an ICU (ineffective efforts, double
triggering, reverse triggering) from airway pressure and flow at 50 Hz.
Functions are compiled through `rcompile = partial(torch.compile, mode="reduce-overhead")`.
"""
import functools
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("icu.vent")
rcompile = functools.partial(torch.compile, mode="reduce-overhead")
BREATH_LEN = 256  # samples per padded breath (5.1 s)
N_BREATHS = 8  # breaths per scoring window


class BreathEncoder(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(2, 32, 7, padding=3), nn.GELU(),
            nn.Conv1d(32, d, 5, padding=2, stride=2), nn.GELU(),
            nn.AdaptiveAvgPool1d(1), nn.Flatten(),
        )

    def forward(self, x):
        return self.conv(x)


ENC = BreathEncoder().cuda().eval()
CLS = nn.Linear(64, 4).cuda().eval()  # normal, ineffective effort, double trigger, reverse trigger


@rcompile
def encode(paw, flow, peep_cmh2o: float):
    drive = paw - peep_cmh2o  # HAZARD: python-scalar
    flow = torch.where(flow.abs() < 0.5, torch.zeros_like(flow), flow)  # CLEAN: torch.where deadband instead of a host branch
    return ENC(torch.stack([drive / 30.0, flow / 60.0], 1))


@rcompile
def classify(z):
    probs = F.softmax(CLS(z), -1)
    log.info("asynchrony index %s", probs[:, 1:].sum(-1).mean())  # HAZARD: host-code
    return probs


def pad_breaths(breaths):
    out = torch.zeros(len(breaths), 2, BREATH_LEN, device="cuda")
    for i, b in enumerate(breaths):
        n = min(b.shape[-1], BREATH_LEN)
        out[i, :, :n] = b[:, :n]
    return out


@torch.no_grad()
def monitor_bed(breaths, peep):
    x = pad_breaths(breaths[-N_BREATHS:])
    z = encode(x[:, 0], x[:, 1], peep).clone()  # CLEAN: padded to a fixed shape and cloned before the next compiled call
    probs = classify(z)
    return probs.argmax(-1).tolist()  # CLEAN: host read right after the call, outside compiled code


@torch.no_grad()
def review_breath(breath, peep):
    """Clinician clicks one breath in the trend view; its raw length is used."""
    z = encode(breath[None, 0], breath[None, 1], peep)  # HAZARD: dynamic-shape
    return classify(z)  # HAZARD: static-address


def synthetic_breath(n, device="cuda"):
    t = torch.linspace(0, 1, n, device=device)
    paw = 5 + 15 * torch.sigmoid((0.35 - t) * 30)
    flow = 40 * torch.sin(torch.pi * t) * (t < 0.4) - 25 * torch.exp(-(t - 0.4).clamp_min(0) * 8) * (t >= 0.4)
    return torch.stack([paw, flow])


if __name__ == "__main__":
    beds = {"bed03": 5.0, "bed07": 8.0, "bed11": 12.0}  # PEEP set per patient
    for minute in range(30):
        for bed, peep in beds.items():
            breaths = [synthetic_breath(int(150 + 80 * torch.rand(()).item())) for _ in range(12)]
            labels = monitor_bed(breaths, peep)
        if minute == 10:
            probs = review_breath(synthetic_breath(193), beds["bed07"])
            print("review:", probs.cpu().numpy().round(3))
    print("last window labels:", labels)
