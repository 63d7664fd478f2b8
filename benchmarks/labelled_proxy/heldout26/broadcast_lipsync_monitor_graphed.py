"""Audio/video sync monitor for a broadcast playout chain (SyncNet-style offset estimation).

For each monitored channel a capture card delivers 25 fps mouth crops (from a face tracker)
and the matching audio. Every 0.6 s window, an audio encoder and a video encoder, graphed
together with torch.cuda.make_graphed_callables, embed the window and the offset is found by
correlating embeddings over +-15 frames. The monitor raises an alarm in the master-control
room when the offset stays above 2 frames, and the encoders can be hot-swapped per channel.
"""
import threading

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

FR, MAX_SHIFT, MELS = 15, 15, 80


class VideoEnc(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv3d(3, 32, (3, 5, 5), (1, 2, 2), (1, 2, 2)), nn.ReLU(),
                                 nn.AdaptiveAvgPool3d((None, 1, 1)), nn.Flatten(2))
        self.proj = nn.Linear(32, 128)

    def forward(self, crops):
        return F.normalize(self.proj(self.net(crops).transpose(1, 2)), dim=-1)


class AudioEnc(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(MELS, 128, 5, padding=2)
        self.proj = nn.Linear(128, 128)

    def forward(self, mel):
        shift = np.random.randint(-1, 2)  # HAZARD: host-code
        mel = torch.roll(mel, shifts=shift, dims=-1)
        h = self.proj(F.relu(self.conv(mel)).transpose(1, 2))
        torch.cuda.empty_cache()  # HAZARD: memory
        return F.normalize(F.avg_pool1d(h.transpose(1, 2), 4).transpose(1, 2), dim=-1)


class SyncMonitor:
    def __init__(self, dev="cuda"):
        self.dev = dev
        self.venc, self.aenc = VideoEnc().to(dev), AudioEnc().to(dev)
        crops = torch.randn(1, 3, FR + 2 * MAX_SHIFT, 48, 96, device=dev)
        mel = torch.randn(1, MELS, 4 * FR, device=dev)
        self.g_venc, self.g_aenc = torch.cuda.make_graphed_callables((self.venc, self.aenc), ((crops,), (mel,)))
        self.lags = torch.arange(-MAX_SHIFT, MAX_SHIFT + 1, device=dev)
        self.lock = threading.Lock()
        self.g_head = graph_offset_head(dev)

    @torch.no_grad()
    def offset(self, crops, mel):
        v = self.g_venc(crops)
        a = self.g_aenc(mel)
        corr = torch.stack([(v[:, s:s + FR] * a).sum(-1).mean(-1) for s in range(2 * MAX_SHIFT + 1)], -1)
        best = corr.argmax(-1)  # CLEAN: device-side argmax, eager
        return self.lags[best], corr.amax(-1)

    def swap_encoders(self, ckpt):
        with self.lock:
            self.venc.load_state_dict(ckpt["video"])  # CLEAN: in-place load keeps the captured addresses
            self.aenc.proj.weight = nn.Parameter(ckpt["audio"]["proj.weight"].to(self.dev))  # HAZARD: static-address


class OffsetHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.score = nn.Linear(2 * MAX_SHIFT + 1, 1)

    def forward(self, corr):
        lag = int(corr.argmax()) - MAX_SHIFT  # HAZARD: host-sync
        return self.score(corr) + lag


def graph_offset_head(dev="cuda"):
    head = OffsetHead().to(dev)
    return torch.cuda.make_graphed_callables(head, (torch.randn(1, 2 * MAX_SHIFT + 1, device=dev),))


def channel_loop(mon, card, alarm, channel):
    bad = 0
    while card.running():
        crops, mel = card.window()
        lag, conf = mon.offset(crops.to(mon.dev), mel.to(mon.dev))
        lag, conf = int(lag), float(conf)  # CLEAN: eager read-back after the graphed calls
        bad = bad + 1 if abs(lag) > 2 and conf > 0.3 else 0
        if bad >= 5:
            alarm.raise_(channel, lag * 40)
            bad = 0
