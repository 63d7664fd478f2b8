"""Early sepsis warning from hourly ICU vitals and labs (PhysioNet 2019 style).

A GRU-D-like decay on missing values feeds a stack of Transformer Engine layers in FP8.
The blocks are graphed with Transformer Engine's make_graphed_callables.
"""
import torch
import torch.nn as nn
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

N_VARS, T, D = 40, 48, 256


class DecayEmbed(nn.Module):
    """Decays the last observed value towards the population mean with time since seen."""

    def __init__(self, p_hide=0.1):
        super().__init__()
        self.proj = nn.Linear(2 * N_VARS, D)
        self.register_buffer("pop_mean", torch.zeros(N_VARS))
        self.p_hide = p_hide
        self.decay_gamma = 0.05            # annealed by the trainer
        self.hide_gen = torch.Generator(device="cuda").manual_seed(17)

    def forward(self, x, delta):
        gamma = self.decay_gamma  # HAZARD: python-scalar
        w = torch.exp(-gamma * delta)
        x = w * x + (1 - w) * self.pop_mean
        keep = torch.rand(x.shape, device=x.device, generator=self.hide_gen) > self.p_hide  # HAZARD: rng
        return self.proj(torch.cat([x * keep, keep.float()], dim=-1))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = te.TransformerLayer(D, 4 * D, 8, self_attn_mask_type="padding", hidden_dropout=0.1)

    def forward(self, h, attention_mask):
        return self.layer(h, attention_mask=attention_mask)


def audit_hook(module, args):
    module._last_in_norm = args[0].detach().norm()


def build(batch=64, n_layers=4):
    embed, blocks = DecayEmbed().cuda(), [Block().cuda() for _ in range(n_layers)]
    head = nn.Linear(D, 1).cuda()
    for blk in blocks:
        blk.register_forward_pre_hook(audit_hook)  # HAZARD: api-misuse
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16)
    x = torch.randn(batch, T, N_VARS, device="cuda")
    dlt = torch.rand(batch, T, N_VARS, device="cuda")
    h = torch.randn(T, batch, D, device="cuda", requires_grad=True)
    mask = torch.zeros(batch, 1, 1, T, dtype=torch.bool, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        g_embed = te.make_graphed_callables(embed, (x, dlt), enabled=False)
        g_blocks = te.make_graphed_callables(
            tuple(blocks), tuple((h,) for _ in blocks),
            sample_kwargs=tuple({"attention_mask": mask} for _ in blocks),
            enabled=True, recipe=recipe, cache_quantized_params=False,
        )
    return embed, g_embed, g_blocks, head, recipe


def train(loader, epochs=20):
    embed, g_embed, g_blocks, head, recipe = build()
    params = [p for m in (embed, head, *g_blocks) for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=2e-4)
    for ep in range(epochs):
        embed.decay_gamma = 0.05 + 0.01 * ep
        for x, delta, pad, y in loader:
            h = g_embed(x, delta).transpose(0, 1).contiguous()
            with te.autocast(enabled=True, recipe=recipe):  # CLEAN: TE autocast around replays, no torch cast cache
                for blk in g_blocks:
                    h = blk(h, attention_mask=pad)  # CLEAN: keyword declared in sample_kwargs
            logit = head(h[-1].float()).squeeze(-1)
            loss = nn.functional.binary_cross_entropy_with_logits(logit.float(), y, pos_weight=torch.tensor(8.0, device="cuda"))
            opt.zero_grad(set_to_none=False)
            loss.backward()
            opt.step()
        print(f"epoch {ep} loss {loss.item():.4f}")  # CLEAN: outside any graph


if __name__ == "__main__":
    fake = [(torch.randn(64, T, N_VARS, device="cuda"), torch.rand(64, T, N_VARS, device="cuda"),
             torch.zeros(64, 1, 1, T, dtype=torch.bool, device="cuda"),
             (torch.rand(64, device="cuda") > 0.9).float()) for _ in range(10)]
    train(fake)
