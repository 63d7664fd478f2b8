"""ELECTRA-small pretraining (Clark et al., ICLR 2020): replaced-token detection
with an eager MLM generator; the discriminator's Transformer Engine layers and
its RTD head are graphed with te.make_graphed_callables (FP8)."""
import argparse
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

parser = argparse.ArgumentParser()
parser.add_argument("--hidden", type=int, default=256)
parser.add_argument("--layers", type=int, default=12)
parser.add_argument("--heads", type=int, default=4)
parser.add_argument("--seq_len", type=int, default=128)
parser.add_argument("--micro_batch", type=int, default=32)
parser.add_argument("--grad_accum", type=int, default=4)
parser.add_argument("--mask_prob", type=float, default=0.15)
parser.add_argument("--disc_weight", type=float, default=50.0)
parser.add_argument("--act_stats", type=int, default=1, help="record layer input norms for the appendix plot")
args = parser.parse_args()
VOCAB, MASK_ID = 30522, 103
recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")

class RTDHead(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.dense, self.out = nn.Linear(h, h), nn.Linear(h, 1)

    def forward(self, hidden, is_replaced, attention_mask):
        logits = self.out(F.gelu(self.dense(hidden.transpose(0, 1)))).squeeze(-1)
        active = attention_mask.view(-1, logits.size(1)) == 1
        return F.binary_cross_entropy_with_logits(logits.view(-1, logits.size(1))[active], is_replaced[active])  # HAZARD: dynamic-shape

def build_discriminator():
    layers = [te.TransformerLayer(args.hidden, 4 * args.hidden, args.heads, hidden_dropout=0.0, attention_dropout=0.0,
                                  self_attn_mask_type="padding", params_dtype=torch.bfloat16).cuda() for _ in range(args.layers)]
    norms = []
    if args.act_stats:
        for layer in layers:
            layer.register_forward_pre_hook(lambda m, a, kw: norms.append(a[0].detach().norm()), with_kwargs=True)  # HAZARD: api-misuse
    S, B, H = args.seq_len, args.micro_batch, args.hidden
    pad = torch.zeros(B, 1, 1, S, dtype=torch.bool, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        graphed_layers = te.make_graphed_callables(
            tuple(layers), tuple((torch.randn(S, B, H, device="cuda", dtype=torch.bfloat16, requires_grad=True),) for _ in layers),
            sample_kwargs=tuple({"attention_mask": pad} for _ in layers),  # CLEAN: the keyword is declared in sample_kwargs
            enabled=True, recipe=recipe, cache_quantized_params=True)
    head = RTDHead(H).cuda().to(torch.bfloat16)
    graphed_head = te.make_graphed_callables(head, (torch.randn(S, B, H, device="cuda", dtype=torch.bfloat16, requires_grad=True),
                                                    torch.zeros(B, S, device="cuda", dtype=torch.bfloat16), torch.ones(B, S, dtype=torch.long, device="cuda")),
                                             enabled=False, cache_quantized_params=False)
    return layers, graphed_layers, graphed_head, norms

def train_step(generator, embed, graphed_layers, head, opt, micro_batches):
    for micro, (ids, attention_mask) in enumerate(micro_batches):
        masked = torch.rand(ids.shape, device=ids.device) < args.mask_prob
        gen_in = ids.masked_fill(masked, MASK_ID)
        with torch.no_grad():
            g_logits = generator(gen_in)
            sampled = torch.argmax(g_logits - torch.log(-torch.log(torch.rand_like(g_logits) + 1e-9) + 1e-9), -1)  # CLEAN: gumbel sampling in eager code
        corrupted = torch.where(masked, sampled, ids)
        is_replaced = (corrupted != ids).to(torch.bfloat16)
        pad = (attention_mask == 0).view(ids.size(0), 1, 1, -1)
        h = embed(corrupted).transpose(0, 1).contiguous()
        with te.autocast(enabled=True, recipe=recipe):  # CLEAN: replays run under te.autocast with the capture recipe
            for layer in graphed_layers:
                h = layer(h, attention_mask=pad)  # HAZARD: api-misuse
        loss = args.disc_weight * head(h, is_replaced, attention_mask) / args.grad_accum
        loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=False)
