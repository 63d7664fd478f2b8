"""Real-time speech enhancement: STFT -> GRU mask estimator -> iSTFT, one hop per replay.

The audio callback thread writes each new hop into a pinned staging buffer;
the processing thread replays the captured graph and reads the enhanced hop back.
"""
import numpy as np
import torch
import torch.nn as nn

N_FFT, HOP = 512, 128


class MaskEstimator(nn.Module):
    def __init__(self, n_bins=N_FFT // 2 + 1, hidden=256):
        super().__init__()
        self.gru = nn.GRU(n_bins, hidden, num_layers=2, batch_first=True)
        self.out = nn.Linear(hidden, n_bins)

    def forward(self, logmag, h):
        y, h_new = self.gru(logmag, h)
        return torch.sigmoid(self.out(y)), h_new


class StreamingEnhancer:
    def __init__(self, model: MaskEstimator, vad_thr=1e-4, comfort_db=-60.0):
        self.model = model.eval().cuda()
        self.pinned_hop = torch.zeros(N_FFT, pin_memory=True)
        self.frame = torch.zeros(N_FFT, device="cuda")
        self.h = torch.zeros(2, 1, 256, device="cuda")
        self.out_hop = torch.zeros(N_FFT, device="cuda")
        self.noise_profile = np.full(N_FFT // 2 + 1, 1e-3, dtype=np.float32)
        self.vad_thr = vad_thr
        self.comfort = 10.0 ** (comfort_db / 20.0)
        self.noise_gen = torch.Generator(device="cuda")
        self.graph = torch.cuda.CUDAGraph()
        self.window = torch.hann_window(N_FFT, device="cuda")

    def _enhance(self):
        spec = torch.stft(self.frame, N_FFT, HOP, window=self.window, center=False, return_complex=True)
        mag, phase = spec.abs(), spec.angle()
        floor = torch.from_numpy(self.noise_profile).cuda()  # HAZARD: pinned-memory
        logmag = torch.log1p(torch.clamp(mag - floor[:, None], min=0.0)).T.unsqueeze(0)
        mask, h_new = self.model(logmag, self.h)
        self.h = h_new  # HAZARD: static-address
        energy = mag.pow(2).mean()
        mask = torch.where(energy > self.vad_thr, mask, torch.zeros_like(mask))  # CLEAN: VAD gate as an elementwise select, no host branch
        clean = mask[0].T * mag * torch.exp(1j * phase)
        wav = torch.istft(clean, N_FFT, HOP, window=self.window, center=False, length=N_FFT)
        cn = torch.randn(wav.shape, device="cuda", generator=self.noise_gen)  # HAZARD: rng
        self.out_hop.copy_(wav + self.comfort * cn)

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(s):
            for _ in range(3):
                self._enhance()
        torch.cuda.current_stream().wait_stream(s)
        with torch.no_grad():
            self.graph.capture_begin()  # HAZARD: stream
            self._enhance()
            self.graph.capture_end()

    def process_hop(self, hop: np.ndarray):
        self.pinned_hop[:-HOP] = self.pinned_hop[HOP:].clone()
        self.pinned_hop[-HOP:] = torch.from_numpy(hop)
        self.frame.copy_(self.pinned_hop, non_blocking=True)  # CLEAN: host staging buffer is pinned and allocated outside the capture
        self.graph.replay()
        return self.out_hop[-HOP:].cpu().numpy()  # CLEAN: host copy after the replay, outside the capture

    def update_noise_profile(self, noise_mag: np.ndarray, alpha=0.95):
        self.noise_profile = alpha * self.noise_profile + (1.0 - alpha) * noise_mag
