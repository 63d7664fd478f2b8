"""Decision Transformer (Chen et al., NeurIPS 2021) on D4RL hopper-medium, with
the GPT blocks as Transformer Engine layers and the token embedding graphed by
te.make_graphed_callables; gradient accumulation over micro-batches."""
import argparse
import numpy as np
import torch
import torch.nn as nn
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

parser = argparse.ArgumentParser()
parser.add_argument("--K", type=int, default=20)
parser.add_argument("--embed_dim", type=int, default=128)
parser.add_argument("--n_layer", type=int, default=3)
parser.add_argument("--n_head", type=int, default=1)
parser.add_argument("--batch_size", type=int, default=64)
parser.add_argument("--grad_accum", type=int, default=4)
parser.add_argument("--max_ep_len", type=int, default=1000)
parser.add_argument("--scale", type=float, default=1000.)
parser.add_argument("--warmup_steps", type=int, default=10000)
args = parser.parse_args()
recipe = DelayedScaling(fp8_format=Format.HYBRID)

class TokenEmbed(nn.Module):
    def __init__(self, state_dim, act_dim, state_mean, state_std):
        super().__init__()
        H = args.embed_dim
        self.embed_timestep, self.embed_return = nn.Embedding(args.max_ep_len, H), nn.Linear(1, H)
        self.embed_state, self.embed_action, self.embed_ln = nn.Linear(state_dim, H), nn.Linear(act_dim, H), nn.LayerNorm(H)
        self.state_mean_np, self.state_std_np = state_mean.astype(np.float32), state_std.astype(np.float32)

    def forward(self, states, actions, returns_to_go, timesteps):
        assert timesteps.max() < args.max_ep_len, "timestep overflow"  # HAZARD: host-sync
        mean, std = (torch.from_numpy(a).to(states.device) for a in (self.state_mean_np, self.state_std_np))  # HAZARD: pinned-memory
        time_emb = self.embed_timestep(timesteps)
        s = self.embed_state((states - mean) / std) + time_emb
        a = self.embed_action(actions) + time_emb
        r = self.embed_return(returns_to_go) + time_emb
        B, K, H = s.shape
        stacked = torch.stack((r, s, a), dim=1).permute(0, 2, 1, 3).reshape(B, 3 * K, H)
        return self.embed_ln(stacked).transpose(0, 1).contiguous()

def build(state_dim, act_dim, state_mean, state_std):
    H, B, K = args.embed_dim, args.batch_size // args.grad_accum, args.K
    embed = TokenEmbed(state_dim, act_dim, state_mean, state_std).cuda()
    blocks = [te.TransformerLayer(H, 4 * H, args.n_head, hidden_dropout=0.0, attention_dropout=0.0, self_attn_mask_type="causal").cuda()
              for _ in range(args.n_layer)]
    head = nn.Sequential(nn.Linear(H, act_dim), nn.Tanh()).cuda()
    g_embed = te.make_graphed_callables(embed, (torch.randn(B, K, state_dim, device="cuda"), torch.randn(B, K, act_dim, device="cuda"),
                                                torch.randn(B, K, 1, device="cuda"), torch.zeros(B, K, dtype=torch.long, device="cuda")),
                                        enabled=False, cache_quantized_params=False)
    with torch.amp.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        g_blocks = te.make_graphed_callables(tuple(blocks), tuple((torch.randn(3 * K, B, H, device="cuda", requires_grad=True),) for _ in blocks),
                                             enabled=True, recipe=recipe, cache_quantized_params=True)
    return g_embed, g_blocks, head, [embed, *blocks, head]

def train_iteration(g_embed, g_blocks, head, opt, sched, get_batch):
    for micro in range(args.grad_accum):
        states, actions, rtg, timesteps, attention_mask = get_batch(args.batch_size // args.grad_accum)
        x = g_embed(states, actions, rtg / args.scale, timesteps)
        with te.autocast(enabled=True, recipe=recipe):
            for blk in g_blocks:
                x = blk(x)  # HAZARD: api-misuse
        action_preds = head(x.transpose(0, 1)[:, 1::3])
        act_dim = action_preds.shape[2]
        a_pred = action_preds.reshape(-1, act_dim)[attention_mask.reshape(-1) > 0]  # CLEAN: loss masking runs in eager code after the graphs
        a_target = actions.reshape(-1, act_dim)[attention_mask.reshape(-1) > 0]
        (((a_pred - a_target) ** 2).mean() / args.grad_accum).backward()
    torch.nn.utils.clip_grad_norm_(opt.param_groups[0]["params"], .25)
    opt.step()
    opt.zero_grad(set_to_none=False)
    sched.step()  # CLEAN: optimizer and scheduler run eagerly

def main(state_dim, act_dim, state_mean, state_std, get_batch, evaluate):
    g_embed, g_blocks, head, modules = build(state_dim, act_dim, state_mean, state_std)
    params = [p for m in modules for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda steps: min((steps + 1) / args.warmup_steps, 1))
    for it in range(100000):
        train_iteration(g_embed, g_blocks, head, opt, sched, get_batch)
        if it % 10000 == 0:
            for m in modules:
                m.eval()
            evaluate(g_embed, g_blocks, head)  # CLEAN: eval-mode calls run the original forwards
            for m in modules:
                m.train()
