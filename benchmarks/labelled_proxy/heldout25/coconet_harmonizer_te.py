"""Bach-chorale harmonizer (Coconet, ported from Magenta's TF code) for the
composition assistant: the user writes a melody, the model in-fills alto/tenor/bass.
The orderless-NADE trunk is a stack of Transformer Engine layers over 32 time steps;
the voice/pitch head is a custom module. Both are graphed with te.make_graphed_callables.
"""
import numpy as np
import torch
import torch.nn as nn
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling

T, VOICES, PITCHES, HIDDEN, BATCH = 32, 4, 46, 512, 32
KEY_PROFILES = np.array([[6.35, 2.23, 3.48, 2.33, 4.38, 4.09, 2.52, 5.19, 2.39, 3.66, 2.29, 2.88]], np.float32)


class VoiceHead(nn.Module):
    def __init__(self, seed=3):
        super().__init__()
        self.out = nn.Linear(HIDDEN, VOICES * PITCHES)
        self.key_bias = nn.Linear(12, PITCHES, bias=False)
        self.key_profiles_np = np.repeat(KEY_PROFILES / KEY_PROFILES.sum(), VOICES, 0)
        self.key_shift = 0
        self.out_of_range = [0, 1, 2, 43, 44, 45]     # pitches outside SATB ranges
        self.mask_gen = torch.Generator(device="cuda")
        self.mask_gen.manual_seed(seed)

    def forward(self, h, roll):
        logits = self.out(h).view(T, -1, VOICES, PITCHES)
        key = torch.as_tensor(self.key_profiles_np, device="cuda")  # HAZARD: pinned-memory
        key = torch.roll(key, self.key_shift, -1)  # HAZARD: python-scalar
        logits = logits + self.key_bias(key)[None, None]
        drop = torch.rand(roll.shape, device="cuda", generator=self.mask_gen) < 0.5  # HAZARD: rng
        logits = logits + drop.float() * roll * 0.1
        logits[..., self.out_of_range] = -1e4  # HAZARD: host-sync
        return logits


class Harmonizer:
    def __init__(self, n_layers=6):
        self.recipe = DelayedScaling()
        self.inp = nn.Linear(VOICES * PITCHES * 2, HIDDEN).cuda()
        self.trunk = nn.ModuleList(te.TransformerLayer(HIDDEN, 4 * HIDDEN, 8, hidden_dropout=0.0,
                                                       attention_dropout=0.0).cuda() for _ in range(n_layers))
        self.head = VoiceHead().cuda()
        x = torch.randn(T, BATCH, HIDDEN, device="cuda", requires_grad=True)
        roll = torch.zeros(T, BATCH, VOICES, PITCHES, device="cuda")
        graphed = te.make_graphed_callables(tuple(self.trunk) + (self.head,),
                                            tuple((x,) for _ in self.trunk) + ((x, roll),),
                                            enabled=True, recipe=self.recipe)
        self.g_trunk, self.g_head = graphed[:-1], graphed[-1]
        params = [p for m in (self.inp, self.trunk, self.head) for p in m.parameters()]
        self.opt = torch.optim.Adam(params, lr=5e-4)

    def step(self, roll, mask, key_of_piece):
        self.head.key_shift = int(key_of_piece)            # transpose the key profile per piece
        x = torch.cat([roll * mask, mask], -1).flatten(-2)
        h = self.inp(x)
        with te.autocast(enabled=True, recipe=self.recipe):  # CLEAN: replay under te.autocast, same recipe
            for layer in self.g_trunk:
                h = layer(h)
            logits = self.g_head(h, roll)
        loss = nn.functional.cross_entropy(logits.flatten(0, 2), roll.argmax(-1).flatten(), reduction="none")
        loss = (loss.view(mask.shape[:-1]) * (1 - mask[..., 0])).mean()
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()  # CLEAN: eager optimizer step, not captured
        return loss.item()  # CLEAN: eager read after the graphed backward


def gibbs_fill(model, melody_roll, iters=64):
    roll = melody_roll.clone()
    rng = np.random.default_rng(0)
    for i in range(iters):
        n_mask = max(1, int(T * VOICES * (1 - i / iters)))
        cells = rng.choice(T * 3, n_mask, replace=False)  # CLEAN: NumPy sampling in the eager Gibbs loop
        # ... resample masked cells from model outputs (eager)
    return roll
