"""De-click / de-crackle restoration for vinyl transfers; stages graphed with torch make_graphed_callables."""
import contextlib
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

class MonitorMixin:
    def attach_monitor(self, store):
        def _rms(mod, inp, out):
            store.setdefault(type(mod).__name__, []).append(out.detach().pow(2).mean())
        return self.register_forward_hook(_rms)  # HAZARD: api-misuse

class DetectorStage(MonitorMixin, nn.Module):
    def __init__(self, ch=32):
        super().__init__()
        self.conv = nn.Conv1d(1, ch, 15, padding=7)
        self.score = nn.Conv1d(ch, 1, 1)
    def forward(self, wav):
        return torch.sigmoid(self.score(F.gelu(self.conv(wav))))

class InpaintStage(nn.Module):
    def __init__(self, ch=32):
        super().__init__()
        self.enc = nn.Conv1d(2, ch, 31, padding=15)
        self.dec = nn.Conv1d(ch, 1, 31, padding=15)
        self.dither = DitherPolicy()
    def forward(self, wav, click_prob):
        fill = self.dec(F.gelu(self.enc(torch.cat([wav, click_prob], 1))))
        mixed = wav * (1 - click_prob) + fill * click_prob  # CLEAN: soft blend, no mask indexing
        return self.dither.apply(mixed)

class DitherPolicy:
    def apply(self, x):
        return x + self._noise(x)
    def _noise(self, x):
        level = np.random.uniform(0.0, 1e-4)  # HAZARD: host-code
        return torch.randn_like(x) * level

@contextlib.contextmanager
def mixed_precision(enabled=True):
    with torch.autocast("cuda", dtype=torch.float16, enabled=enabled):  # HAZARD: autocast-cache
        yield

@contextlib.contextmanager
def replay_precision():
    with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # CLEAN: cache disabled, around replays only
        yield

class RestorationChain:
    def __init__(self, seg=16384):
        self.detector, self.inpaint = DetectorStage().cuda(), InpaintStage().cuda()
        self.levels = {}
        self.detector.attach_monitor(self.levels)
        wav = torch.randn(8, 1, seg, device="cuda")
        prob = torch.rand(8, 1, seg, device="cuda", requires_grad=True)
        with mixed_precision():
            self.g_detect, self.g_inpaint = torch.cuda.make_graphed_callables(
                (self.detector, self.inpaint), ((wav,), (wav.clone(), prob)))
        self.stages = {"detect": self._detect, "inpaint": self._inpaint}
        self.opt = torch.optim.AdamW(list(self.detector.parameters()) + list(self.inpaint.parameters()), lr=3e-4)
    def _detect(self, wav):
        return self.g_detect(wav)  # CLEAN: positional call of the graphed callable
    def _inpaint(self, wav, prob):
        return self.g_inpaint(wav, click_prob=prob)  # HAZARD: api-misuse
    def run(self, name, *args):
        return self.stages[name](*args)
    def train_step(self, noisy, clean):
        self.opt.zero_grad(set_to_none=True)
        with replay_precision():
            prob = self.run("detect", noisy)
            restored = self.run("inpaint", noisy, prob)
        loss = F.l1_loss(restored.float(), clean)
        loss.backward()
        self.opt.step()  # CLEAN: eager optimizer outside the graphed callables
        return float(loss)  # CLEAN: host read outside any graph
    def add_late_probe(self, store):
        self.inpaint.register_forward_hook(lambda m, i, o: store.append(o.detach().abs().max()))  # CLEAN: hook after graphing

def restore_album(tracks):
    chain = RestorationChain()
    return [chain.train_step(n.cuda(), c.cuda()) for n, c in tracks]
