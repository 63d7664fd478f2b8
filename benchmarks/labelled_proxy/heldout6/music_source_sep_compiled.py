"""Music source separation (vocals / drums / bass / other), Conv-TasNet style.

A learned filterbank encoder, a dilated temporal-conv separator producing four masks
and a transposed-conv decoder. Songs are processed in 6 s chunks with overlap-add.
The separator forward is swapped for a compiled one with mode="max-autotune".
"""
import logging
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("separate")
SR, CHUNK, HOP, N_SRC = 44100, 6 * 44100, 5 * 44100, 4


class TCNBlock(nn.Module):
    def __init__(self, ch, hidden, dilation):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(ch, hidden, 1), nn.PReLU(), nn.GroupNorm(1, hidden),
                                 nn.Conv1d(hidden, hidden, 3, padding=dilation, dilation=dilation, groups=hidden),
                                 nn.PReLU(), nn.GroupNorm(1, hidden), nn.Conv1d(hidden, ch, 1))

    def forward(self, x):
        return x + self.net(x)


class ConvTasNet(nn.Module):
    def __init__(self, n_filters=256, kernel=20, bottleneck=128, hidden=256, repeats=2, blocks=6):
        super().__init__()
        self.encoder = nn.Conv1d(2, n_filters, kernel, stride=kernel // 2, bias=False)
        self.bottleneck = nn.Conv1d(n_filters, bottleneck, 1)
        self.tcn = nn.Sequential(*[TCNBlock(bottleneck, hidden, 2 ** b) for _ in range(repeats) for b in range(blocks)])
        self.masks = nn.Conv1d(bottleneck, N_SRC * n_filters, 1)
        self.decoder = nn.ConvTranspose1d(n_filters, 2, kernel, stride=kernel // 2, bias=False)

    def forward(self, mix):
        # mix: (B, 2, T) stereo
        log.debug("separating chunk with peak %s", mix.abs().amax())  # HAZARD: host-code
        if mix.abs().max() > 1.0:  # HAZARD: dynamic-control-flow
            mix = mix / mix.abs().max()
        w = F.relu(self.encoder(mix))
        m = torch.sigmoid(self.masks(self.tcn(self.bottleneck(w)))).view(mix.shape[0], N_SRC, w.shape[1], -1)
        est = self.decoder((m * w.unsqueeze(1)).flatten(0, 1))
        return est.view(mix.shape[0], N_SRC, 2, -1)[..., :mix.shape[-1]]


def normalize_batch(mix):
    return mix / mix.abs().amax(-1, keepdim=True).clamp_min(1.0)  # CLEAN: branch-free peak normalisation


def si_sdr(est, ref, eps=1e-8):
    alpha = (est * ref).sum(-1, keepdim=True) / (ref.pow(2).sum(-1, keepdim=True) + eps)
    proj = alpha * ref
    return 10 * torch.log10(proj.pow(2).sum(-1) / ((est - proj).pow(2).sum(-1) + eps))


si_sdr_c = torch.compile(si_sdr)  # default inductor for the metric


@torch.no_grad()
def separate(model, song):
    T = song.shape[-1]
    out = torch.zeros(N_SRC, 2, T, device=song.device)
    win = torch.hann_window(CHUNK, device=song.device)
    chunks = []
    for start in range(0, T, HOP):
        piece = song[None, :, start:start + CHUNK]
        stems = model(piece)  # HAZARD: dynamic-shape
        chunks.append((start, stems))  # HAZARD: static-address
    for start, stems in chunks:
        n = stems.shape[-1]
        out[..., start:start + n] += stems[0] * win[:n]
    return out


@torch.no_grad()
def separate_padded(model, song):
    T = song.shape[-1]
    out = torch.zeros(N_SRC, 2, T, device=song.device)
    win = torch.hann_window(CHUNK, device=song.device)
    for start in range(0, T, HOP):
        piece = F.pad(song[None, :, start:start + CHUNK], (0, max(0, start + CHUNK - T)))
        stems = model(piece).clone()  # CLEAN: padded to CHUNK samples and cloned
        n = min(CHUNK, T - start)
        out[..., start:start + n] += stems[0, ..., :n] * win[:n]
    return out


if __name__ == "__main__":
    model = ConvTasNet().cuda().eval()
    model.forward = torch.compile(model.forward, mode="max-autotune")
    for seconds in (183, 241):
        song = normalize_batch(torch.randn(1, 2, seconds * SR, device="cuda") * 0.3)[0]
        stems = separate_padded(model, song)
        score = si_sdr_c(stems.sum(0), song).mean().item()  # CLEAN: default torch.compile, no CUDA graphs
        print(f"{seconds}s song: remix SI-SDR {score:.1f} dB")
        stems_fast = separate(model, song)
