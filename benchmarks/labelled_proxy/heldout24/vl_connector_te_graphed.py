"""Vision-language connector pretraining (LLaVA stage 1) with TE FP8 projector layers.

The vision tower and the language model are frozen and run eagerly; only the
two-layer projector is trained.  The projector is graphed with Transformer Engine's
make_graphed_callables, with FP8 weight caching across gradient-accumulation steps.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

PATCHES, VIS_D, LM_D, MICRO = 576, 1024, 4096, 16


class Projector(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = te.Linear(VIS_D, LM_D, params_dtype=torch.bfloat16)
        self.fc2 = te.Linear(LM_D, LM_D, params_dtype=torch.bfloat16)
        self.feature_scale = 1.0
        self.last_norm = 0.0

    def forward(self, feats, is_first_microbatch=None):
        scale = self.feature_scale  # HAZARD: python-scalar
        h = F.gelu(self.fc1(feats * scale, is_first_microbatch=is_first_microbatch))
        out = self.fc2(h, is_first_microbatch=is_first_microbatch)
        if out.isnan().any():  # HAZARD: dynamic-control-flow
            out = torch.nan_to_num(out)
        self.last_norm = out.float().norm().item()  # HAZARD: host-sync
        return out


class ConnectorTrainer:
    def __init__(self, vision, lm, accum=8):
        self.vision = vision.cuda().eval().requires_grad_(False)
        self.lm = lm.cuda().eval().requires_grad_(False)
        self.proj = Projector().cuda()
        self.recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=32, amax_compute_algo="max")
        self.accum = accum
        feats = torch.randn(MICRO * PATCHES, VIS_D, dtype=torch.bfloat16, device="cuda", requires_grad=False)
        self.g_proj = te.make_graphed_callables(
            self.proj, (feats,),
            enabled=True, recipe=self.recipe, cache_quantized_params=True,
        )
        self.proj.register_forward_hook(lambda m, a, o: None)  # CLEAN: hook added after graphing
        self.opt = torch.optim.AdamW(self.proj.parameters(), lr=1e-3)

    def micro_step(self, images, ids, labels, first: bool):
        with torch.no_grad():
            feats = self.vision(images.cuda(non_blocking=True))  # CLEAN: frozen tower, eager
        with te.autocast(enabled=True, recipe=self.recipe):
            vis_tok = self.g_proj(feats.flatten(0, 1), is_first_microbatch=first)  # CLEAN: is_first_microbatch given with cached FP8 weights
        vis_tok = vis_tok.view(images.shape[0], PATCHES, LM_D)
        emb = self.lm.get_input_embeddings()(ids.cuda())
        logits = self.lm(inputs_embeds=torch.cat([vis_tok, emb], dim=1)).logits
        loss = F.cross_entropy(logits[:, PATCHES:-1].flatten(0, 1).float(), labels.cuda()[:, 1:].flatten(), ignore_index=-100)
        (loss / self.accum).backward()
        return loss.detach()

    def eval_caption_loss(self, images, ids, labels):
        with torch.no_grad():
            feats = self.vision(images.cuda())
            with te.autocast(enabled=True, recipe=self.recipe):
                vis_tok = self.g_proj(feats.flatten(0, 1))  # HAZARD: api-misuse
        return vis_tok

    def fit(self, loader, epochs=1):
        step = 0
        for _ in range(epochs):
            for i, (images, ids, labels) in enumerate(loader):
                loss = self.micro_step(images, ids, labels, first=(i % self.accum == 0))
                if (i + 1) % self.accum == 0:
                    self.opt.step()  # CLEAN: eager optimizer step
                    self.opt.zero_grad(set_to_none=False)
                    step += 1
                    if step % 100 == 0:
                        print(step, loss.item(), self.proj.last_norm)  # CLEAN: eager print
                    self.proj.feature_scale = 1.0 + 0.5 * min(1.0, step / 1000)
