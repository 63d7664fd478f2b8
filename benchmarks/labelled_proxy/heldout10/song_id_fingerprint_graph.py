"""Query-by-recording for a song-identification app: neural audio fingerprints.

One-second clips (8 kHz mono, 32 per batch) are turned into log-mel patches,
encoded to unit 128-d fingerprints for the ANN index, and the strongest
spectral peaks are kept for the hash-based fallback. The mel front end is the
compiled module shared with the training code.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

SR, N_FFT, HOP, N_MELS = 8000, 1024, 256, 64
BATCH = 32


class LogMel(nn.Module):
    def __init__(self, mel_fb):
        super().__init__()
        self.register_buffer("window", torch.hann_window(N_FFT))
        self.register_buffer("fb", mel_fb)  # (N_FFT // 2 + 1, N_MELS) from the training checkpoint

    def forward(self, wav):
        spec = torch.stft(wav, N_FFT, HOP, window=self.window, return_complex=True).abs() ** 2
        return torch.log1p(spec.transpose(1, 2) @ self.fb)


class Encoder(nn.Module):
    def __init__(self, d=128):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, 32, 3, stride=2, padding=1), nn.ELU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ELU(),
            nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.ELU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.proj = nn.Linear(128, d)

    def forward(self, mel):
        return self.proj(self.conv(mel).flatten(1))


class FingerprintService:
    def __init__(self, encoder, mel_fb, device="cuda"):
        self.device = device
        self.frontend = torch.compile(LogMel(mel_fb).to(device))
        self.encoder = encoder.eval().to(device)
        self.clip = torch.zeros(BATCH, SR, device=device)
        self.graph = torch.cuda.CUDAGraph()
        self.out = None

    def _fingerprint(self, wav):
        torch.cuda.synchronize()  # HAZARD: host-sync
        mel = self.frontend(wav)  # HAZARD: api-misuse
        emb = F.normalize(self.encoder(mel.unsqueeze(1)), dim=-1)
        local_max = F.max_pool2d(mel.unsqueeze(1), 5, stride=1, padding=2).squeeze(1)
        peaks = ((mel == local_max) & (mel > 2.0)).nonzero()  # HAZARD: dynamic-shape
        strength, pk_idx = torch.topk(mel.flatten(1), k=32)  # CLEAN: fixed-k topk for the hash index
        return emb, pk_idx, peaks

    @torch.no_grad()
    def capture(self):
        frames = 1 + SR // HOP
        dummy = torch.zeros(BATCH, 1, frames, N_MELS, device=self.device)
        for _ in range(3):
            self.encoder(dummy)  # the front end is shared with training and already compiled there
        torch.cuda.synchronize()  # CLEAN: synchronize before the capture starts
        with torch.cuda.graph(self.graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
            self.out = self._fingerprint(self.clip)

    def query(self, clips):
        self.clip.copy_(clips)  # CLEAN: copy into the captured input
        self.graph.replay()
        emb, pk_idx, _ = self.out
        return emb.clone(), pk_idx.clone()


def serve(service, index, mic_queue):
    service.capture()
    while True:
        clips = mic_queue.next_batch(BATCH).to("cuda", non_blocking=True)
        emb, peaks = service.query(clips)
        hits = index.search(emb.cpu().numpy(), k=5)
        mic_queue.reply(hits, peaks.cpu())


if __name__ == "__main__":
    ckpt = torch.load("fingerprinter.pt", map_location="cpu")
    enc = Encoder()
    enc.load_state_dict(ckpt["encoder"])
    svc = FingerprintService(enc, ckpt["mel_fb"])
