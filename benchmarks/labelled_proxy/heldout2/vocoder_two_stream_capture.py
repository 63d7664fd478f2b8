"""Neural vocoder serving path: upsampler and noise branch run on separate streams inside one graph."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Upsampler(nn.Module):
    def __init__(self, n_mels=80, ch=256, hop=256):
        super().__init__()
        self.pre = nn.Conv1d(n_mels, ch, 7, padding=3)
        self.ups = nn.ModuleList(nn.ConvTranspose1d(ch, ch, 2 * r, stride=r, padding=r // 2) for r in (8, 8, 4))
        self.post = nn.Conv1d(ch, 1, 7, padding=3)

    def forward(self, mel):
        h = self.pre(mel)
        for up in self.ups:
            h = F.leaky_relu(up(h), 0.1)
        return torch.tanh(self.post(h))


class GraphedVocoder:
    def __init__(self, model, max_frames=400, n_mels=80, hop=256, noise_seed=7):
        self.model = model.cuda().eval()
        self.mel = torch.zeros(1, n_mels, max_frames, device="cuda")
        self.noise_scale = torch.full((1,), 0.003, device="cuda")
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(noise_seed)
        self.n_samples = max_frames * hop
        self.spk_np = np.ones(n_mels, dtype=np.float32)
        self.aux = torch.cuda.Stream()
        self.post = torch.cuda.Stream()
        self.graph = torch.cuda.CUDAGraph()
        self.wav = None
        self.gpu_idle = True

    @torch.inference_mode()
    def _synth(self):
        main = torch.cuda.current_stream()
        n = self.n_samples  # HAZARD: python-scalar
        self.aux.wait_stream(main)
        with torch.cuda.stream(self.aux):  # HAZARD: stream
            dither = torch.randn(1, 1, n, device="cuda", generator=self.gen)  # HAZARD: rng
        spk = torch.from_numpy(self.spk_np).pin_memory().cuda(non_blocking=True)  # HAZARD: pinned-memory
        wav = self.model(self.mel * spk[None, :, None]) + dither * self.noise_scale
        self.post.wait_stream(main)
        with torch.cuda.stream(self.post):  # CLEAN: forked from and joined back to the capture stream
            peak = wav.abs().amax().clamp(min=1e-4)
            wav = wav / peak * 0.95
        main.wait_stream(self.post)
        with torch.cuda.stream(torch.cuda.default_stream()):  # HAZARD: stream
            wav = F.pad(wav, (0, 256))
        self.gpu_idle = torch.cuda.current_stream().query()  # HAZARD: host-sync
        return wav[..., :n]

    def warmup_and_capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                self._synth()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph, stream=side):
            self.wav = self._synth()

    def __call__(self, mel, speaker_gain: np.ndarray, seed=None):
        frames = mel.shape[-1]
        self.spk_np[:] = speaker_gain
        self.mel.zero_()
        self.mel[..., :frames].copy_(mel)  # CLEAN: static mel buffer refreshed in place, unused frames cleared
        self.n_samples = frames * 256
        if seed is not None:
            self.gen.manual_seed(seed)
        self.graph.replay()
        return self.wav.clone()
