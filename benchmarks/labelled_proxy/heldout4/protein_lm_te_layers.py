"""ESM-style protein masked language model with Transformer Engine layers graphed per block.

Each block wraps a TE TransformerLayer with token dropout and a layer-scale
warm-up.  Blocks are graphed with TE make_graphed_callables (FP8 delayed scaling).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format


class ProteinBlock(nn.Module):
    def __init__(self, hidden=1280, heads=20, ffn=5120, token_drop=0.1, seed=0):
        super().__init__()
        self.layer = te.TransformerLayer(hidden, ffn, heads, hidden_dropout=0.0, attention_dropout=0.0,
                                         self_attn_mask_type="no_mask", layer_number=None)
        self.token_drop = token_drop
        self.residual_scale = 0.1
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(seed)

    def forward(self, h):
        keep = torch.rand(h.shape[:2], device=h.device, generator=self.gen) > self.token_drop  # HAZARD: rng
        h = h * keep[..., None].to(h.dtype)
        return h + self.residual_scale * (self.layer(h) - h)  # HAZARD: python-scalar


class ProteinMLM(nn.Module):
    def __init__(self, vocab=33, hidden=1280, n_layers=12):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden, padding_idx=1)
        self.blocks = nn.ModuleList([ProteinBlock(hidden, seed=i) for i in range(n_layers)])
        self.lm_head = nn.Linear(hidden, vocab)
        self.graphed = None

    def _check_input(self, module, args):
        assert args[0].dtype in (torch.float32, torch.bfloat16)

    def graph_blocks(self, seq_len, batch, hidden=1280, recipe=None):
        recipe = recipe or DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16)
        for blk in self.blocks:
            blk.register_forward_pre_hook(self._check_input)  # HAZARD: api-misuse
        samples = tuple((torch.randn(seq_len, batch, hidden, device="cuda", requires_grad=True),)
                        for _ in self.blocks)
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            self.graphed = te.make_graphed_callables(tuple(self.blocks), samples, num_warmup_iters=3,
                                                     enabled=True, recipe=recipe)

    def graph_eval_blocks(self, seq_len, batch, hidden=1280):
        samples = tuple((torch.randn(seq_len, batch, hidden, device="cuda"),) for _ in self.blocks)
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: weight cache disabled for graphing
            return te.make_graphed_callables(tuple(self.blocks), samples, num_warmup_iters=2)

    def forward(self, tokens):
        h = self.embed(tokens).transpose(0, 1).contiguous()
        for blk in (self.graphed or self.blocks):
            h = blk(h)
        return self.lm_head(h.transpose(0, 1))


def train(model: ProteinMLM, loader, opt, seed=1234, warmup_steps=10_000):
    torch.cuda.manual_seed(seed)  # CLEAN: seeded once before any graph is built
    model.graph_blocks(seq_len=512, batch=8)
    for step, (tokens, targets) in enumerate(loader):
        tokens, targets = tokens.cuda(non_blocking=True), targets.cuda(non_blocking=True)
        logits = model(tokens)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        for blk in model.blocks:
            blk.residual_scale = min(1.0, 0.1 + 0.9 * step / warmup_steps)
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.3f}")  # CLEAN: host read in the eager loop, outside the graphed blocks
