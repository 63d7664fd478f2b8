"""Document-layout encoder (LayoutLM-like) served with tensor parallelism (TP=4, sequence
parallel) and FP8 on Transformer Engine. Token embeddings get a 2-D box position embedding;
the encoder is graphed once with TE make_graphed_callables (attention mask as a sample kwarg)."""
import logging

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling

log = logging.getLogger("layout")
HID, FFN, HEADS, SEQ, B = 1024, 4096, 16, 512, 32


class BoxPositions(nn.Module):
    def __init__(self, grid_path):
        super().__init__()
        self.grid_np = np.load(grid_path).astype(np.float32)  # (1001, HID) sinusoid table for 0..1000 coords
        self.proj = nn.Linear(4 * HID, HID)

    def forward(self, boxes):
        table = torch.as_tensor(self.grid_np, device=boxes.device)  # HAZARD: pinned-memory
        emb = table[boxes.clamp(0, 1000)]  # CLEAN: gather with a CUDA index tensor
        return self.proj(emb.flatten(-2))


class LayoutEncoder(nn.Module):
    def __init__(self, tp_group, grid_path, layers=12, mc_drop=0.1):
        super().__init__()
        self.pos = BoxPositions(grid_path)
        self.layers = nn.ModuleList(
            te.TransformerLayer(HID, FFN, HEADS, hidden_dropout=0.0, attention_dropout=0.0,
                                set_parallel_mode=True, tp_group=tp_group, tp_size=dist.get_world_size(tp_group),
                                sequence_parallel=True, params_dtype=torch.bfloat16, self_attn_mask_type="padding")
            for _ in range(layers))
        self.mc_gen = torch.Generator(device="cuda")
        self.mc_drop = mc_drop

    def forward(self, tok, boxes, attention_mask):
        x = tok + self.pos(boxes)
        for layer in self.layers:
            x = layer(x, attention_mask=attention_mask)
        keep = torch.bernoulli(torch.full_like(x[..., :1], 1 - self.mc_drop), generator=self.mc_gen)  # HAZARD: rng
        log.debug(f"encoder out absmax={x.abs().max()}")  # HAZARD: host-sync
        return x * keep


class LayoutServer:
    def __init__(self, tp_group, grid_path):
        self.recipe = DelayedScaling()
        self.tp_group = tp_group
        enc = LayoutEncoder(tp_group, grid_path).cuda().eval()
        tok = torch.zeros(SEQ // dist.get_world_size(tp_group), B, HID, dtype=torch.bfloat16, device="cuda")
        boxes = torch.zeros(SEQ // dist.get_world_size(tp_group), B, 4, dtype=torch.long, device="cuda")
        mask = torch.zeros(B, 1, 1, SEQ, dtype=torch.bool, device="cuda")
        self.enc = te.make_graphed_callables(enc, (tok, boxes), sample_kwargs={"attention_mask": mask},
                                             enabled=True, recipe=self.recipe)

    @torch.no_grad()
    def encode(self, tok, boxes, pad):
        with te.autocast(enabled=True, recipe=self.recipe, amax_reduction_group=self.tp_group):  # CLEAN: replay under te.autocast
            return self.enc(tok, boxes, attention_mask=pad).clone()  # CLEAN: keyword declared in sample_kwargs

    @torch.no_grad()
    def encode_unpadded(self, tok, boxes):
        with te.autocast(enabled=True, recipe=self.recipe, amax_reduction_group=self.tp_group):
            return self.enc(tok, boxes).clone()  # HAZARD: api-misuse

    def mask_from_lengths(self, lengths):
        ar = torch.arange(SEQ, device="cuda")
        pad = ar[None, :] >= lengths[:, None]
        return pad.masked_fill(lengths[:, None] == 0, False)[:, None, None, :]  # CLEAN: masked_fill keeps the shape
