"""Neural audio codec (SoundStream/EnCodec-like) streaming encoder with residual VQ.

A 20 ms hop is encoded per call. The conv encoder + RVQ is captured once; the
bitrate controller chooses how many quantizers are used for the next packets.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ResidualVQ(nn.Module):
    def __init__(self, n_q_max=16, codebook_size=1024, dim=128):
        super().__init__()
        self.codebooks = nn.Parameter(torch.randn(n_q_max, codebook_size, dim))
        self.codebook_size = codebook_size
        self.n_q = 8
        self.min_residual = 1e-4

    def encode(self, x):  # x: (B, T, D)
        residual, codes = x, []
        for q in range(self.n_q):  # HAZARD: python-scalar
            cb = self.codebooks[q]
            d = torch.cdist(residual, cb[None].expand(residual.shape[0], -1, -1))
            idx = d.argmin(-1)  # CLEAN: fixed-shape nearest-code search, no sync
            residual = residual - F.embedding(idx, cb)
            codes.append(idx)
            if residual.abs().max() < self.min_residual:  # HAZARD: dynamic-control-flow
                break
        return torch.stack(codes, 1)

    def usage(self, codes):
        return F.one_hot(codes, self.codebook_size).sum(dim=(0, 2))  # CLEAN: fixed-size histogram instead of bincount


class StreamingEncoder:
    def __init__(self, encoder, rvq, hop=320, batch=64):
        self.encoder, self.rvq = encoder.eval().cuda(), rvq.eval().cuda()
        self.wav = torch.zeros(batch, 1, hop * 4, device="cuda")
        self.codes_host = torch.empty(batch, 16, 4, dtype=torch.long, pin_memory=True)
        self.packets = []
        self.graph = torch.cuda.CUDAGraph()

    def _encode(self):
        lat = self.encoder(self.wav).transpose(1, 2)
        codes = self.rvq.encode(lat)
        self.code_hist = self.rvq.usage(codes)
        self.header = codes[:, 0, 0].tolist()  # HAZARD: host-sync
        n = codes.shape[1]
        self.codes_host[:, :n].copy_(codes, non_blocking=True)  # CLEAN: D2H into pinned memory allocated before capture
        return codes

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._encode()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.codes = self._encode()

    def set_bitrate(self, kbps, frame_rate=75, bits_per_code=10):
        self.rvq.n_q = max(1, min(16, int(kbps * 1000 // (frame_rate * bits_per_code))))

    @torch.no_grad()
    def push(self, chunk):
        self.wav.copy_(chunk)
        self.graph.replay()
        self.packets.append(self.codes)  # HAZARD: static-address
        torch.cuda.current_stream().synchronize()
        return self.codes_host.clone()
