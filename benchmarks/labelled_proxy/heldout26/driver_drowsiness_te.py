"""In-cabin driver monitoring: drowsiness (PERCLOS) and distraction from the IR cabin camera.

Face-crop patch tokens come from the DMS camera pipeline at 30 fps; a small Transformer
Engine encoder plus an eye-state head, graphed together with te.make_graphed_callables, give
per-frame eye-closure and gaze-off-road scores. The warning manager escalates chime ->
seat vibration -> lane-keeping takeover. Night mode changes the eye-closure threshold.
"""
import collections

import torch
import torch.nn as nn
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

TOK, HID = 64, 256


class EyeStateHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(HID, 3)
        self.closure_thr = 0.6
        self.aug_gen = torch.Generator(device="cuda")

    def forward(self, h):
        logits = self.proj(h.mean(0))
        noise = torch.randn(logits.shape, device=logits.device, generator=self.aug_gen) * 0.01  # HAZARD: rng
        p = (logits + noise).sigmoid()
        thr = self.closure_thr  # HAZARD: python-scalar
        closed = p[:, 0] > thr
        self.closed_offroad = p[:, 1][closed]  # HAZARD: dynamic-shape
        return torch.stack([closed.float(), p[:, 1], p[:, 2]], -1)


class DrowsinessModel:
    def __init__(self, dev="cuda"):
        self.recipe = DelayedScaling(fp8_format=Format.HYBRID)
        self.enc = te.TransformerLayer(HID, 4 * HID, 4, hidden_dropout=0.0, attention_dropout=0.0).to(dev)
        self.head = EyeStateHead().to(dev)
        self.head.register_forward_hook(self._log)  # HAZARD: api-misuse
        x = torch.randn(TOK, 1, HID, device=dev, requires_grad=True)
        h = torch.randn(TOK, 1, HID, device=dev, requires_grad=True)
        self.g_enc, self.g_head = te.make_graphed_callables(
            (self.enc, self.head), ((x,), (h,)), enabled=True, recipe=self.recipe, cache_quantized_params=True)
        self.enc.register_forward_hook(self._log)  # CLEAN: registered after graphing
        self.first = True

    def _log(self, mod, inp, out):
        return None

    @torch.no_grad()
    def __call__(self, tokens):
        with te.autocast(enabled=True, recipe=self.recipe):  # CLEAN: replay under te.autocast with the graphing recipe
            h = self.g_enc(tokens, is_first_microbatch=self.first)  # CLEAN: is_first_microbatch passed
            out = self.g_head(h)
        self.first = False
        return out


class WarningManager:
    LEVELS = ("none", "chime", "vibrate", "takeover")

    def __init__(self, model, fps=30):
        self.model = model
        self.closed = collections.deque(maxlen=fps * 60)
        self.level = 0

    def on_frame(self, tokens, night):
        self.model.head.closure_thr = 0.5 if night else 0.6
        out = self.model(tokens)[0].float().cpu()
        self.closed.append(float(out[0]))
        perclos = sum(self.closed) / len(self.closed)
        if perclos > 0.3 or out[1] > 0.8:
            self.level = min(self.level + 1, 3)
        elif perclos < 0.1:
            self.level = 0
        return self.LEVELS[self.level]

    def offroad_frames(self, scores):
        return scores[scores[:, 1] > 0.8]  # CLEAN: eager mask index on host scores
