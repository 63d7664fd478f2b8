"""TinyBERT-style intermediate-layer distillation of a 12-layer teacher into a 4-layer student.

The student's Transformer Engine layers are graphed with TE make_graphed_callables (FP8,
weight caching across gradient-accumulation micro-batches). Each student layer is matched
to every third teacher layer with an MSE on hidden states; the teacher runs eagerly.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

HID, HEADS, SEQ, MB = 384, 6, 128, 32


class StudentBlock(nn.Module):
    def __init__(self, layerdrop=0.1):
        super().__init__()
        self.layer = te.TransformerLayer(HID, 4 * HID, HEADS, hidden_dropout=0.0, attention_dropout=0.0,
                                         self_attn_mask_type="padding")
        self.layerdrop = layerdrop
        self.hidden_noise = 0.0
        self.noise_gen = torch.Generator(device="cuda")
        self.noise_gen.manual_seed(3)

    def forward(self, x, attention_mask):
        if self.training and random.random() < self.layerdrop:  # HAZARD: host-code
            return x * 1.0
        h = self.layer(x, attention_mask=attention_mask)
        noise = torch.randn(h.shape, device=h.device, generator=self.noise_gen)  # HAZARD: rng
        return h + self.hidden_noise * noise  # HAZARD: python-scalar


class Distiller:
    def __init__(self, teacher, embed, n_layers=4, accum=4):
        self.teacher = teacher.eval().cuda()
        self.embed = embed.cuda()
        self.blocks = [StudentBlock().cuda() for _ in range(n_layers)]
        self.proj = nn.Linear(HID, teacher.config.hidden_size).cuda()
        self.accum = accum
        self.recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=32)
        params = [p for m in [self.embed, self.proj, *self.blocks] for p in m.parameters()]
        self.opt = torch.optim.AdamW(params, lr=5e-4, weight_decay=0.01)
        x = torch.randn(SEQ, MB, HID, device="cuda", requires_grad=True)
        mask = torch.zeros(MB, 1, 1, SEQ, dtype=torch.bool, device="cuda")
        self.g_blocks = te.make_graphed_callables(
            tuple(self.blocks), tuple((x.detach().clone().requires_grad_(True),) for _ in self.blocks),
            sample_kwargs=tuple({"attention_mask": mask} for _ in self.blocks),
            enabled=True, recipe=self.recipe, cache_quantized_params=True)

    def student(self, ids, pad, first):
        h = self.embed(ids).transpose(0, 1).contiguous()
        hiddens = []
        with te.autocast(enabled=True, recipe=self.recipe):  # CLEAN: replays under te.autocast
            for blk in self.g_blocks:
                h = blk(h, attention_mask=pad, is_first_microbatch=first)  # CLEAN: flag passed on every training replay
                hiddens.append(h)
        return hiddens

    def step(self, batch, epoch):
        for blk in self.blocks:
            blk.hidden_noise = 0.02 * max(0.0, 1.0 - epoch / 3)
        self.opt.zero_grad(set_to_none=True)
        for mb, (ids, attn) in enumerate(zip(batch["ids"].split(MB), batch["attn"].split(MB))):
            pad = ~attn.bool()[:, None, None, :]
            with torch.no_grad():
                t_hidden = self.teacher(ids, attention_mask=attn, output_hidden_states=True).hidden_states
            s_hidden = self.student(ids, pad, first=(mb == 0))
            loss = sum(F.mse_loss(self.proj(s.transpose(0, 1)), t_hidden[3 * (i + 1)])
                       for i, s in enumerate(s_hidden)) / self.accum
            loss.backward()
        self.opt.step()

    @torch.no_grad()
    def validate(self, loader):
        total, n = 0.0, 0
        for ids, attn in loader:
            pad = ~attn.bool()[:, None, None, :]
            h = self.embed(ids).transpose(0, 1).contiguous()
            with te.autocast(enabled=True, recipe=self.recipe):
                for blk in self.g_blocks:
                    h = blk(h, attention_mask=pad)  # HAZARD: api-misuse
            t = self.teacher(ids, attention_mask=attn, output_hidden_states=True).hidden_states[-1]
            total += F.mse_loss(self.proj(h.transpose(0, 1)), t).item()  # CLEAN: eager metric outside the graphs
            n += 1
        return total / max(n, 1)
