"""Online spike detection and template matching for a Neuropixels 1.0 probe.

Every 20 ms chunk (600 samples x 384 channels) is median-referenced, whitened and
matched-filtered against a template bank from an offline Kilosort run. The chunk
pipeline is one CUDA graph replayed as data arrive from the acquisition card.
"""
import numpy as np
import torch
import torch.nn.functional as F

FS = 30_000
CHUNK = 600
N_CH = 384


class SpikeDetector:
    def __init__(self, whitening: torch.Tensor, templates: torch.Tensor, bad_channels=(191,), device="cuda"):
        self.dev = device
        self.good_channels = [c for c in range(N_CH) if c not in set(bad_channels)]
        self.good_idx = torch.tensor(self.good_channels, device=device)  # CLEAN: index tensor built once, before capture
        self.W = whitening.to(device)          # (C_good, C_good)
        self.templates = templates.to(device)  # (K, C_good, T_tmpl)
        self.threshold = 6.0
        self.static_raw = torch.zeros(N_CH, CHUNK, device=device)
        self.graph = torch.cuda.CUDAGraph()

    def _drift(self, raw):
        return raw.index_select(0, self.good_idx).std(dim=1)  # CLEAN: index_select with a CUDA index tensor

    def _sort(self, raw):
        x = raw[self.good_channels]  # HAZARD: host-sync
        x = x - x.median(dim=1, keepdim=True).values
        xw = self.W @ x
        score = F.conv1d(xw.unsqueeze(0), self.templates).squeeze(0)  # (K, CHUNK - T + 1)
        peak = F.max_pool1d(score.unsqueeze(0), 31, stride=1, padding=15).squeeze(0)
        is_peak = (score == peak) & (score > self.threshold)
        best = torch.where(is_peak, score, torch.zeros_like(score)).amax(dim=0)  # CLEAN: torch.where keeps a fixed shape
        spikes = is_peak.nonzero()  # HAZARD: dynamic-shape
        counts = is_peak.sum(dim=1).tolist()  # HAZARD: host-sync
        return best, spikes, counts, self._drift(raw)

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._sort(self.static_raw)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
            self.out = self._sort(self.static_raw)

    def process(self, chunk: torch.Tensor):
        self.static_raw.copy_(chunk)
        self.graph.replay()
        best, _, _, drift = self.out
        n_units = int((best > self.threshold).sum())  # CLEAN: host read after the replay
        return n_units, drift


def load_bank(n_good, k=96, t=61, seed=0):
    rng = np.random.default_rng(seed)
    tmpl = rng.standard_normal((k, n_good, t)).astype(np.float32)
    tmpl /= np.linalg.norm(tmpl.reshape(k, -1), axis=1)[:, None, None]
    return torch.eye(n_good), torch.from_numpy(tmpl)


if __name__ == "__main__":
    W, tmpl = load_bank(N_CH - 1)
    det = SpikeDetector(W, tmpl)
    det.capture()
    total = 0
    for _ in range(500):  # 10 s of data
        chunk = torch.randn(N_CH, CHUNK, device="cuda") * 10.0
        n, _ = det.process(chunk)
        total += n
    print("units active per chunk (mean):", total / 500)
