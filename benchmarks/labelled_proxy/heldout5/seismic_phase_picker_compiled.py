"""PhaseNet-style P/S phase picker for continuous three-component seismograms."""
import logging
import torch
import torch.nn as nn
import torch.nn.functional as F

logger = logging.getLogger("picker")
FS, WIN = 100.0, 3000


class PhaseNet(nn.Module):
    def __init__(self, ch=(8, 16, 32, 64)):
        super().__init__()
        self.inc = nn.Conv1d(3, ch[0], 7, padding=3)
        self.down = nn.ModuleList(nn.Conv1d(a, b, 7, stride=4, padding=3) for a, b in zip(ch[:-1], ch[1:]))
        self.up = nn.ModuleList(nn.ConvTranspose1d(b, a, 4, stride=4) for a, b in zip(ch[:-1], ch[1:]))
        self.out = nn.Conv1d(ch[0], 3, 1)

    def forward(self, w):  # (B, 3, T), T a multiple of 64
        x = F.relu(self.inc(w))
        skips = []
        for d in self.down:
            skips.append(x)
            x = F.relu(d(x))
        for u in reversed(self.up):
            x = F.relu(u(x)) + skips.pop()
        return self.out(x)  # logits for noise, P, S


def demean_(w):
    w.sub_(w.mean(-1, keepdim=True))  # HAZARD: static-address
    return w / (w.abs().amax(-1, keepdim=True) + 1e-8)  # CLEAN: out-of-place scaling after the demean


def first_arrival(prob):
    p_idx = prob[:, 1].argmax(-1)
    t_p = float(p_idx[0]) / FS  # HAZARD: host-sync
    logger.info("first P arrival at %.2f s", t_p)  # HAZARD: host-code
    return t_p


def extract_picks(prob, thresh=0.3):
    pk = prob[:, 1:]
    peaks = (pk > thresh) & (pk == F.max_pool1d(pk, 51, 1, 25))
    return peaks.nonzero()  # CLEAN: nonzero under a max-autotune-no-cudagraphs compile


model = PhaseNet().cuda().eval()
pick_probs = torch.compile(lambda w: model(w).softmax(1), mode="reduce-overhead")
normalize = torch.compile(demean_, mode="reduce-overhead")
arrival = torch.compile(first_arrival, mode="reduce-overhead")
picks_of = torch.compile(extract_picks, mode="max-autotune-no-cudagraphs")


@torch.no_grad()
def process_station_days(traces):
    out = []
    for tr in traces:  # (3, T): one station-day each, T differs with gaps and sample dropouts
        T = tr.shape[-1] // 64 * 64
        prob = pick_probs(normalize(tr[None, :, :T].clone()))  # HAZARD: dynamic-shape
        out.append(picks_of(prob).cpu())
    return out


@torch.no_grad()
def process_windows(traces, batch=64):
    arrivals = []
    for tr in traces:
        wins = tr[:, : tr.shape[-1] // (WIN // 2) * (WIN // 2)].unfold(-1, WIN, WIN // 2).permute(1, 0, 2).contiguous()
        for chunk in wins.split(batch):
            n = chunk.shape[0]
            chunk = F.pad(chunk, (0, 0, 0, 0, 0, batch - n))
            prob = pick_probs(normalize(chunk[:, :, :2944]))  # CLEAN: fixed (64, 3, 2944) windows
            arrivals.append(arrival(prob))
    return arrivals


if __name__ == "__main__":
    days = [torch.randn(3, 8_640_000 - k * 1000, device="cuda") for k in range(3)]
    print(len(process_windows(days)))
