"""FastSpeech2-style acoustic model for an audiobook narration app.

Phoneme encoder -> duration predictor -> length regulator -> mel decoder.
Two graphs are captured: an exact one for offline chapter rendering and a
fixed-grid one for the streaming preview player.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_PHONES, D, N_MELS = 96, 256, 80
MAX_PH, MAX_FRAMES = 256, 1600


class PhonemeEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(N_PHONES, D, padding_idx=0)
        self.fft = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, 2, 1024, batch_first=True), 4)
        self.dur = nn.Sequential(nn.Conv1d(D, D, 3, padding=1), nn.ReLU(), nn.Conv1d(D, 1, 3, padding=1))

    def forward(self, ph, spk):
        h = self.fft(self.emb(ph) + spk.unsqueeze(1))
        log_dur = self.dur(h.transpose(1, 2)).squeeze(1)
        return h, log_dur.masked_fill(ph == 0, -10.0)


class MelDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fft = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, 2, 1024, batch_first=True), 4)
        self.proj = nn.Linear(D, N_MELS)

    def forward(self, frames):
        return self.proj(self.fft(frames))


class Narrator:
    def __init__(self, enc, dec, default_voice):
        self.enc, self.dec = enc.cuda().eval(), dec.cuda().eval()
        self.speed = 1.0
        self.spk = default_voice.cuda()
        self.ph = torch.zeros(1, MAX_PH, dtype=torch.long, device="cuda")
        self.grid = torch.arange(MAX_FRAMES, device="cuda", dtype=torch.float32).unsqueeze(0)
        self.pool = torch.cuda.graph_pool_handle()

    def set_voice(self, spk_emb):
        self.spk = spk_emb.cuda()  # HAZARD: static-address

    def set_speed(self, speed):
        self.speed = speed

    def _exact(self):
        h, log_dur = self.enc(self.ph, self.spk)
        speed = self.speed  # HAZARD: python-scalar
        dur = torch.clamp(torch.round(torch.exp(log_dur) / speed), min=0).long()  # CLEAN: clamp keeps the shape
        n_frames = int(dur.sum(-1).max())  # HAZARD: host-sync
        frames = torch.repeat_interleave(h[0], dur[0], dim=0)  # HAZARD: dynamic-shape
        return self.dec(frames[:n_frames].unsqueeze(0))

    def _fixed(self):
        h, log_dur = self.enc(self.ph, self.spk)
        dur = torch.clamp(torch.round(torch.exp(log_dur)), min=0)
        ends = torch.cumsum(dur, -1)
        idx = torch.searchsorted(ends, self.grid, right=True).clamp(max=MAX_PH - 1)  # CLEAN: fixed-size frame grid
        frames = torch.gather(h, 1, idx.unsqueeze(-1).expand(-1, -1, D))
        valid = (self.grid < ends[:, -1:]).unsqueeze(-1)
        return self.dec(frames) * valid

    @torch.no_grad()
    def capture(self):
        self.graphs, self.outs = {}, {}
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        for name in ("_fixed", "_exact"):
            fn = getattr(self, name)
            with torch.cuda.stream(s):
                for _ in range(2):
                    fn()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):
                self.outs[name] = fn()
            self.graphs[name] = g

    def render(self, phonemes, streaming=False):
        n = phonemes.shape[-1]
        self.ph.zero_()
        self.ph[0, :n].copy_(phonemes)  # CLEAN: copy_ into the static phoneme buffer
        key = "_fixed" if streaming else "_exact"
        self.graphs[key].replay()
        return self.outs[key].clone()


if __name__ == "__main__":
    nar = Narrator(PhonemeEncoder(), MelDecoder(), torch.randn(1, D))
    nar.capture()
    chapter = [torch.randint(1, N_PHONES, (int(n),), device="cuda") for n in torch.randint(20, MAX_PH, (50,))]
    mels = [nar.render(s) for s in chapter]
    nar.set_voice(torch.randn(1, D))
    nar.set_speed(1.25)
    preview = nar.render(chapter[0], streaming=True)
