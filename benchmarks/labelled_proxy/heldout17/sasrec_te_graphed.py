"""SASRec next-item recommendation on Transformer Engine layers with FP8.

Item/position embedding and the causal self-attention blocks are graphed with TE
make_graphed_callables (TE >= 2.9 keyword names); the sampled-softmax loss stays eager.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

MAX_LEN, D, HEADS = 200, 128, 4


class ItemEmbedding(nn.Module):
    def __init__(self, n_items, dim=D, max_len=MAX_LEN, item_drop=0.1):
        super().__init__()
        self.items = nn.Embedding(n_items + 1, dim, padding_idx=0)
        self.pos = nn.Embedding(max_len, dim)
        self.item_drop = item_drop
        self.drop_gen = torch.Generator(device="cuda")
        self.drop_gen.manual_seed(17)

    def forward(self, seq):
        n = int((seq > 0).sum(1).max())  # HAZARD: host-sync
        seq = seq[:, -n:]  # histories are left-padded; drop all-padding columns
        keep = torch.rand(seq.shape, device=seq.device, generator=self.drop_gen) > self.item_drop  # HAZARD: rng
        h = self.items(seq * keep) * (D ** 0.5)
        h = h + self.pos(torch.arange(seq.shape[1], device=seq.device))
        return h.transpose(0, 1).contiguous()  # [S, B, D] for TE


class SASBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = te.TransformerLayer(D, 4 * D, HEADS, hidden_dropout=0.0, attention_dropout=0.0,
                                         self_attn_mask_type="padding_causal", fuse_qkv_params=True)

    def forward(self, h, attention_mask):
        return self.layer(h, attention_mask=attention_mask)


def check_finite(module, args):
    module.saw_input = args[0].abs().amax()


class SASRec:
    def __init__(self, n_items, n_blocks=2, batch=128):
        self.embed = ItemEmbedding(n_items).cuda()
        self.blocks = [SASBlock().cuda() for _ in range(n_blocks)]
        for blk in self.blocks:
            blk.register_forward_pre_hook(check_finite)  # HAZARD: api-misuse
        self.recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
        params = list(self.embed.parameters()) + [p for b in self.blocks for p in b.parameters()]
        self.opt = torch.optim.Adam(params, lr=1e-3, betas=(0.9, 0.98))
        seq = torch.randint(1, n_items, (batch, MAX_LEN), device="cuda")
        h = torch.randn(MAX_LEN, batch, D, device="cuda", requires_grad=True)
        pad = torch.zeros(batch, 1, 1, MAX_LEN, dtype=torch.bool, device="cuda")
        modules = (self.embed, *self.blocks)
        args = ((seq,),) + tuple((h.detach().clone().requires_grad_(True),) for _ in self.blocks)
        kwargs = ({},) + tuple({"attention_mask": pad} for _ in self.blocks)
        with torch.amp.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            graphed = te.make_graphed_callables(modules, args, sample_kwargs=kwargs, enabled=True,
                                                recipe=self.recipe, cache_quantized_params=False)
        self.g_embed, self.g_blocks = graphed[0], graphed[1:]

    def encode(self, seq):
        pad = (seq == 0)[:, None, None, :]
        with te.autocast(enabled=True, recipe=self.recipe):  # CLEAN: replays under te.autocast with the capture recipe
            h = self.g_embed(seq)
            for blk in self.g_blocks:
                h = blk(h, attention_mask=pad)  # CLEAN: keyword declared in sample_kwargs
        return h.transpose(0, 1)

    def train_step(self, seq, pos, neg):
        h = self.encode(seq)
        pos_logit = (h * self.embed.items(pos)).sum(-1)
        neg_logit = (h * self.embed.items(neg)).sum(-1)
        valid = (pos > 0).float()
        loss = (F.binary_cross_entropy_with_logits(pos_logit, torch.ones_like(pos_logit), reduction="none")
                + F.binary_cross_entropy_with_logits(neg_logit, torch.zeros_like(neg_logit), reduction="none"))
        loss = (loss * valid).sum() / valid.sum()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return loss.item()  # CLEAN: read after backward, outside the graphed callables

    @torch.no_grad()
    def recommend(self, seq, k=10):
        h = self.encode(seq)[:, -1]
        scores = h @ self.embed.items.weight.t()
        scores = scores.scatter(1, seq, float("-inf"))  # CLEAN: scatter with a CUDA index, eager
        return torch.topk(scores, k).indices
