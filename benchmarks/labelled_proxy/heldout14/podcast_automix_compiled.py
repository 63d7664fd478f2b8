"""Auto-mixer of a podcast hosting platform: per-stem gain curves towards the show's loudness target.

Stems (voice, music bed, sound effects) are measured in 100 ms blocks; a GRU predicts
per-block gains. Production compiles with **COMPILE_KW (max-autotune, dynamic=False),
the editor preview with **PREVIEW_KW (no CUDA graphs).
"""
import torch
import torch.nn as nn

COMPILE_KW = dict(mode="max-autotune", dynamic=False)
PREVIEW_KW = dict(mode="max-autotune-no-cudagraphs")
SR, HOP = 48000, 4800
STEMS = ("voice", "music", "sfx")


class GainNet(nn.Module):
    def __init__(self, n_stems=len(STEMS), d=64):
        super().__init__()
        self.gru = nn.GRU(2 * n_stems, d, batch_first=True)
        self.out = nn.Linear(d, n_stems)
        self.target_lufs = -16.0         # per show: -16 podcasts, -19 audiobooks, -14 music shows

    def forward(self, stems):                             # [B, n_stems, samples]
        blocks = stems.unfold(-1, HOP, HOP)               # [B, S, n_blocks, HOP]
        lufs = -0.691 + 10 * torch.log10(blocks.pow(2).mean(-1).clamp_min(1e-10))
        feats = torch.cat([lufs, lufs - lufs.mean(-1, keepdim=True)], 1).transpose(1, 2) / 20.0
        h, _ = self.gru(feats)
        gain_db = self.out(h).transpose(1, 2)             # [B, S, n_blocks]
        mix_lufs = torch.logsumexp(lufs * 0.2303, 1) / 0.2303   # energy sum of the stems, in dB
        if mix_lufs.mean() < -50:  # HAZARD: dynamic-control-flow
            return torch.zeros_like(gain_db)              # digital silence: leave it alone
        target = self.target_lufs  # HAZARD: python-scalar
        gain_db = gain_db + (target - mix_lufs)[:, None]
        quiet = (mix_lufs < -45)[:, None]
        return torch.where(quiet, torch.zeros_like(gain_db), gain_db).clamp(-24, 24)  # CLEAN: torch.where instead of a branch


class AutoMixer:
    def __init__(self, net, chunk_s=10):
        self.live = torch.compile(net, **COMPILE_KW)
        self.preview = torch.compile(net, **PREVIEW_KW)
        self.chunk = chunk_s * SR

    @torch.no_grad()
    def gains_whole(self, stems):
        # one call per episode: every upload has its own duration
        return self.live(stems[None])  # HAZARD: dynamic-shape

    @torch.no_grad()
    def gains_chunked(self, stems):
        out = []
        for s in range(0, stems.shape[-1] - self.chunk + 1, self.chunk):
            g = self.live(stems[None, :, s: s + self.chunk])  # CLEAN: fixed 10 s chunks, one graph
            out.append(g)  # HAZARD: static-address
        return torch.cat(out, -1)

    @torch.no_grad()
    def preview_gains(self, stems):
        return self.preview(stems[None])  # CLEAN: no-cudagraphs preview, any length is fine


def render(stems, gains_db):
    g = torch.repeat_interleave(10 ** (gains_db[0] / 20.0), HOP, dim=-1)
    n = g.shape[-1]
    return (stems[:, :n] * g).sum(0)


def process_uploads(net, uploads):
    mixer = AutoMixer(net)
    for show, stems in uploads:
        net.target_lufs = show.target_lufs
        stems = stems.cuda()
        gains = mixer.gains_chunked(stems) if show.long_form else mixer.gains_whole(stems)
        yield show.episode_id, render(stems, gains)
