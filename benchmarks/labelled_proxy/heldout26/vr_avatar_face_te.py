"""Face tracking for VR avatars: 52 blendshape weights from the headset's mouth and eye IR
cameras, on Transformer Engine layers graphed with te.make_graphed_callables (FP8).

A capture thread produces patch tokens from the three IR cameras at 72 Hz; the avatar service
runs the graphed encoder + blendshape head and streams weights to remote peers over the
session socket. Weights are cached in FP8 between replays.
"""
import torch
import torch.nn as nn
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

TOKENS, HID, N_BS = 192, 512, 52


class BlendshapeHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(HID)
        self.proj = nn.Linear(HID, N_BS)
        self.expr_count = 0

    def forward(self, h):
        w = torch.sigmoid(self.proj(self.norm(h).mean(1)))
        self.expr_count = int((w > 0.5).sum())  # HAZARD: host-sync
        return w


class FaceEncoder:
    def __init__(self, n_layers=4, dev="cuda"):
        self.recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16)
        self.layers = [te.TransformerLayer(HID, 4 * HID, 8, hidden_dropout=0.0, attention_dropout=0.0,
                                           params_dtype=torch.bfloat16).to(dev) for _ in range(n_layers)]
        self.head = BlendshapeHead().to(dev).to(torch.bfloat16)
        self.layers[0].register_forward_pre_hook(self._stamp)  # HAZARD: api-misuse
        sample = torch.randn(TOKENS, 1, HID, device=dev, dtype=torch.bfloat16, requires_grad=True)
        head_sample = torch.randn(1, TOKENS, HID, device=dev, dtype=torch.bfloat16, requires_grad=True)
        samples = tuple((sample,) for _ in self.layers) + ((head_sample,),)
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            graphed = te.make_graphed_callables(
                tuple(self.layers) + (self.head,), samples,
                enabled=True, recipe=self.recipe, cache_quantized_params=True)
        self.g_layers, self.g_head = graphed[:-1], graphed[-1]
        self.head.register_forward_hook(self._post)  # CLEAN: hook added after graphing
        self.frame = 0

    def _stamp(self, mod, args):
        return None

    def _post(self, mod, inp, out):
        return out

    @torch.no_grad()
    def __call__(self, tokens):
        first = self.frame == 0
        h = tokens
        with te.autocast(enabled=True, recipe=self.recipe):  # CLEAN: replay under te.autocast, as graphed
            for i, layer in enumerate(self.g_layers):
                if i == 0:
                    h = layer(h, is_first_microbatch=first)  # CLEAN: is_first_microbatch passed on replay
                else:
                    h = layer(h)  # HAZARD: api-misuse
            w = self.g_head(h.transpose(0, 1))
        self.frame += 1
        return w


class AvatarService:
    def __init__(self, peers):
        self.enc = FaceEncoder()
        self.peers = peers
        self.smooth = None

    def on_tokens(self, tokens):
        w = self.enc(tokens).float()
        self.smooth = w if self.smooth is None else 0.6 * self.smooth + 0.4 * w
        payload = (self.smooth.clamp(0, 1) * 255).to(torch.uint8).cpu().numpy().tobytes()
        for p in self.peers:
            p.send(payload)
        return int((self.smooth > 0.5).sum())  # CLEAN: eager count outside the graphed callables

    def on_refit(self, new_head_state):
        self.enc.head.load_state_dict(new_head_state)  # CLEAN: in-place parameter load keeps addresses
