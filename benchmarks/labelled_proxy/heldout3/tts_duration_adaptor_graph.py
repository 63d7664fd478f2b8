"""FastSpeech2-style acoustic model with a captured variance adaptor + decoder.

Phoneme sequences are padded to MAX_PHONES and mel output to MAX_FRAMES so one
graph serves every sentence. `pace` is the user's speaking-rate knob.
"""
import torch
import torch.nn as nn

MAX_PHONES, MAX_FRAMES = 256, 1600


def length_regulate(h, dur, max_frames):
    cum = dur.cumsum(-1)
    frames = torch.arange(max_frames, device=h.device)[None].expand(h.shape[0], -1).contiguous()
    idx = torch.searchsorted(cum, frames, right=True).clamp_max(h.shape[1] - 1)  # CLEAN: fixed-shape gather, no host sync
    return h.gather(1, idx[..., None].expand(-1, -1, h.shape[-1]))


class VarianceAdaptor(nn.Module):
    def __init__(self, dim=256):
        super().__init__()
        self.dur = nn.Sequential(nn.Conv1d(dim, dim, 3, padding=1), nn.ReLU(), nn.Conv1d(dim, 1, 1))
        self.pitch = nn.Conv1d(dim, 1, 3, padding=1)
        self.energy = nn.Conv1d(dim, 1, 3, padding=1)
        self.pitch_emb = nn.Linear(1, dim)
        self.pace = 1.0

    def durations(self, h, phone_mask):
        log_dur = self.dur(h.transpose(1, 2)).squeeze(1)
        dur = torch.clamp(torch.round(log_dur.exp() * self.pace), min=1) * phone_mask  # HAZARD: python-scalar
        dur[:, -1] += MAX_FRAMES - dur.sum(-1)
        return dur.long()

    def forward(self, h, phone_mask):
        dur = self.durations(h, phone_mask)
        n_frames = int(dur[0].sum().item())  # HAZARD: host-sync
        pitch = self.pitch(h.transpose(1, 2)).squeeze(1)
        pitch_f = torch.repeat_interleave(pitch[0], dur[0])  # HAZARD: dynamic-shape
        energy = self.energy(h.transpose(1, 2)).squeeze(1)
        energy_f = torch.repeat_interleave(energy[0], dur[0], output_size=MAX_FRAMES)  # CLEAN: output_size given, no sync
        x = length_regulate(h, dur, MAX_FRAMES)
        pitch_f = nn.functional.pad(pitch_f, (0, MAX_FRAMES - n_frames))
        x = x + self.pitch_emb(pitch_f[None, :, None]) + energy_f[None, :, None]
        return x


class TTSGraphRunner:
    def __init__(self, encoder, adaptor, decoder, postnet, noise_scale=0.33):
        self.encoder, self.adaptor, self.decoder = encoder.eval(), adaptor.eval(), decoder.eval()
        self.postnet_c = torch.compile(postnet.eval())
        self.noise_scale = noise_scale
        self.noise_gen = torch.Generator(device="cuda")
        self.noise_gen.manual_seed(0)
        self.phones = torch.zeros(1, MAX_PHONES, dtype=torch.long, device="cuda")
        self.mask = torch.zeros(1, MAX_PHONES, device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    def _acoustic(self):
        h = self.encoder(self.phones, self.mask)
        x = self.adaptor(h, self.mask)
        mel = self.decoder(x)
        z = torch.randn(mel.shape, device=mel.device, generator=self.noise_gen)  # CLEAN: generator registered with the graph below
        return mel + self.noise_scale * z

    @torch.no_grad()
    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        self.graph.register_generator_state(self.noise_gen)
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            with torch.cuda.stream(side):
                for _ in range(3):
                    self._acoustic()
            torch.cuda.current_stream().wait_stream(side)
            with torch.cuda.graph(self.graph):
                mel = self._acoustic()
                self.mel_out = mel + self.postnet_c(mel)  # HAZARD: api-misuse

    @torch.no_grad()
    def synthesize(self, phone_ids, pace=1.0):
        self.adaptor.pace = pace
        self.phones.zero_()
        self.mask.zero_()
        self.phones[0, : len(phone_ids)] = torch.as_tensor(phone_ids, device="cuda")  # CLEAN: eager upload in the request path, outside the capture
        self.mask[0, : len(phone_ids)] = 1.0
        self.graph.replay()
        return self.mel_out.float().clone()
