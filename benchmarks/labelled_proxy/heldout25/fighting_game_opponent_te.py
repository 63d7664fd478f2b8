"""Opponent modelling for the fighting-game CPU player: predict the human's next move
from the last 32 frames of inputs and game state, so the AI can punish habits.
Transformer Engine layers in FP8, graphed per layer with te.make_graphed_callables;
the move head (legal-move masking) is graphed with them.
"""
import torch
import torch.nn as nn
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

HIDDEN, FRAMES, BATCH, N_MOVES = 256, 32, 64, 96


class MoveHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(HIDDEN, N_MOVES)

    def forward(self, h, legal_mask):
        logits = self.proj(h[-1])
        logits = logits.masked_fill(~legal_mask, -1e4)  # CLEAN: masked_fill keeps the shape static
        legal_logits = logits[legal_mask]  # HAZARD: dynamic-shape
        return logits, legal_logits.logsumexp(0)


class OpponentModel:
    def __init__(self, n_layers=4):
        self.recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16)
        self.embed = nn.Linear(48, HIDDEN).cuda()
        self.layers = nn.ModuleList(
            te.TransformerLayer(HIDDEN, 4 * HIDDEN, 8, hidden_dropout=0.0, attention_dropout=0.0,
                                self_attn_mask_type="causal").cuda() for _ in range(n_layers))
        self.head = MoveHead().cuda()
        self.habit_counts = {}
        for layer in self.layers:
            layer.register_forward_pre_hook(self._count_calls)  # HAZARD: api-misuse
        x = torch.randn(FRAMES, BATCH, HIDDEN, device="cuda", requires_grad=True)
        legal = torch.ones(BATCH, N_MOVES, dtype=torch.bool, device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            graphed = te.make_graphed_callables(
                tuple(self.layers) + (self.head,),
                tuple((x,) for _ in self.layers) + ((x, legal),),
                enabled=True, recipe=self.recipe, cache_quantized_params=True)
        self.g_layers, self.g_head = graphed[:-1], graphed[-1]
        params = list(self.embed.parameters()) + list(self.layers.parameters()) + list(self.head.parameters())
        self.opt = torch.optim.AdamW(params, lr=1e-4)

    def _count_calls(self, module, args):
        self.habit_counts[id(module)] = self.habit_counts.get(id(module), 0) + 1

    def train_step(self, frames, legal, target, micro):
        h = self.embed(frames).transpose(0, 1).contiguous()
        with te.autocast(enabled=True, recipe=self.recipe):  # CLEAN: replay under te.autocast with the same recipe
            for layer in self.g_layers:
                h = layer(h, is_first_microbatch=(micro == 0))  # CLEAN: is_first_microbatch passed on every replay
            logits, _ = self.g_head(h, legal)
        loss = nn.functional.cross_entropy(logits, target)
        loss.backward()
        if micro == 3:
            self.opt.step()
            self.opt.zero_grad(set_to_none=False)
        return loss.detach()

    @torch.no_grad()
    def predict(self, frames, legal):
        h = self.embed(frames).transpose(0, 1).contiguous()
        with te.autocast(enabled=True, recipe=self.recipe):
            for layer in self.g_layers:
                h = layer(h)  # HAZARD: api-misuse
            logits, _ = self.g_head(h, legal)
        return logits.softmax(-1)
