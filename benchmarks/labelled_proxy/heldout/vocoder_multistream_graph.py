import torch
import torch.nn as nn


class Band(nn.Module):
    def __init__(self, n_mels, hop):
        super().__init__()
        self.up = nn.ConvTranspose1d(n_mels, 64, hop * 2, stride=hop, padding=hop // 2)
        self.out = nn.Conv1d(64, 1, 7, padding=3)

    def forward(self, mel):
        return torch.tanh(self.out(torch.relu(self.up(mel))))


class MultiBandVocoder(nn.Module):
    def __init__(self, n_mels=80, hop=256, n_bands=4):
        super().__init__()
        self.bands = nn.ModuleList([Band(n_mels, hop // n_bands) for _ in range(n_bands)])
        self.band_streams = [torch.cuda.Stream() for _ in range(n_bands)]
        self.stat_stream = torch.cuda.Stream()
        self.window = torch.hann_window(1024, device="cuda")
        self.energy = None

    def forward(self, mel):
        cur = torch.cuda.current_stream()
        outs = [None] * len(self.bands)
        for i, (band, s) in enumerate(zip(self.bands, self.band_streams)):
            s.wait_stream(cur)
            with torch.cuda.stream(s):  # CLEAN: every band stream is joined back below
                outs[i] = band(mel)
        for s in self.band_streams:
            cur.wait_stream(s)
        audio = torch.cat(outs, dim=-1).squeeze(1)
        self.stat_stream.wait_stream(cur)
        with torch.cuda.stream(self.stat_stream):  # HAZARD: stream
            self.energy = audio.pow(2).mean(-1)
        return self._denoise(audio)

    def _denoise(self, audio):
        with torch.cuda.stream(torch.cuda.default_stream(audio.device)):  # HAZARD: stream
            spec = torch.stft(audio, 1024, 256, window=self.window, return_complex=True)
            mag = spec.abs()
            spec = spec * (mag > 0.01 * mag.mean(-1, keepdim=True))
        return torch.istft(spec, 1024, 256, window=self.window, length=audio.shape[-1])


class GraphedSynth:
    def __init__(self, vocoder, n_mels=80, frames=256):
        self.vocoder = vocoder.cuda().eval()
        self.mel = torch.zeros(1, n_mels, frames, device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    @torch.inference_mode()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.vocoder(self.mel)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            torch.cuda.empty_cache()  # HAZARD: host-code
            self.audio = self.vocoder(self.mel)
            self.host_audio = torch.empty(self.audio.shape, dtype=self.audio.dtype, pin_memory=True)  # HAZARD: pinned-memory
            self.host_audio.copy_(self.audio, non_blocking=True)

    def synthesize(self, mel):
        self.mel.copy_(mel)
        self.graph.replay()
        torch.cuda.current_stream().synchronize()  # CLEAN: stream sync after replay so the pinned host copy is complete
        return self.host_audio.numpy().copy()  # CLEAN: host buffer read after replay; .numpy() of a CPU tensor


if __name__ == "__main__":
    synth = GraphedSynth(MultiBandVocoder())
    synth.capture()
    wav = synth.synthesize(torch.randn(1, 80, 256, device="cuda"))
    print(wav.shape)
