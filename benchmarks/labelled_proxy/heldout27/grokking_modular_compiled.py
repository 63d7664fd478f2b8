"""Grokking on modular addition (Power et al. 2022; Nanda et al. 2023 progress
measures): a one-layer transformer trained full-batch with heavy weight decay;
the train step and AdamW step are compiled with triton.cudagraphs."""
import argparse
import logging
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--p", type=int, default=113)
parser.add_argument("--frac_train", type=float, default=0.3)
parser.add_argument("--d_model", type=int, default=128)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--wd", type=float, default=1.0)
parser.add_argument("--wd_late", type=float, default=0.1, help="ablation: drop wd after wd_switch")
parser.add_argument("--wd_switch", type=int, default=10000)
parser.add_argument("--reinit_embed_at", type=int, default=20000, help="ablation: re-draw the embedding after grokking")
parser.add_argument("--num_epochs", type=int, default=40000)
parser.add_argument("--seed", type=int, default=598)
args = parser.parse_args()
logging.basicConfig(level=logging.INFO)
log = logging.getLogger("grok")
CG = {"triton.cudagraphs": True}

class OneLayerTransformer(nn.Module):
    def __init__(self, d_vocab, d_model, n_ctx=3, n_heads=4, d_mlp=512):
        super().__init__()
        self.W_E = nn.Parameter(torch.randn(d_model, d_vocab) / np.sqrt(d_model))
        self.W_pos = nn.Parameter(torch.randn(n_ctx, d_model) / np.sqrt(d_model))
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.W_O = nn.Linear(d_model, d_model, bias=False)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_mlp), nn.ReLU(), nn.Linear(d_mlp, d_model))
        self.W_U = nn.Parameter(torch.randn(d_model, d_vocab) / np.sqrt(d_vocab))
        self.n_heads = n_heads

    def forward(self, x):
        h = self.W_E[:, x].permute(1, 2, 0) + self.W_pos
        B, N, C = h.shape
        q, k, v = self.qkv(h).view(B, N, 3, self.n_heads, C // self.n_heads).permute(2, 0, 3, 1, 4)
        h = h + self.W_O(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, N, C))
        return (h + self.mlp(h)) @ self.W_U

@torch.compile(options=CG)
def train_step(model, x, y):
    logits = model(x)[:, -1]
    loss = F.cross_entropy(logits.to(torch.float64), y)
    acc = (logits.argmax(-1) == y).float().mean().item()  # HAZARD: host-sync
    log.info("train loss %s acc %.3f", loss, acc)  # HAZARD: host-code
    return loss

def make_data(p, device):
    pairs = torch.cartesian_prod(torch.arange(p), torch.arange(p))
    data = torch.cat([pairs, torch.full((p * p, 1), p)], 1)
    labels = (pairs[:, 0] + pairs[:, 1]) % p
    perm = torch.randperm(p * p, generator=torch.Generator().manual_seed(args.seed))  # CLEAN: data split drawn once on the host before training
    cut = int(args.frac_train * p * p)
    return data[perm[:cut]].to(device), labels[perm[:cut]].to(device), data[perm[cut:]].to(device), labels[perm[cut:]].to(device)

def main():
    torch.manual_seed(args.seed)
    train_x, train_y, test_x, test_y = make_data(args.p, "cuda")
    model = OneLayerTransformer(args.p + 1, args.d_model).cuda()
    lr = torch.tensor(0.0, device="cuda")
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=args.wd, betas=(0.9, 0.98), capturable=True)
    opt_step = torch.compile(optimizer.step, options=CG)
    for epoch in range(args.num_epochs):
        lr.fill_(args.lr * min(epoch / 10, 1.0))  # CLEAN: tensor LR updated in place
        if epoch == args.wd_switch:
            for g in optimizer.param_groups:
                g["weight_decay"] = args.wd_late  # HAZARD: optimizer
        if epoch == args.reinit_embed_at:
            model.W_E = nn.Parameter(torch.randn_like(model.W_E) / np.sqrt(args.d_model))  # HAZARD: static-address
        loss = train_step(model, train_x, train_y)
        loss.backward()
        opt_step()
        optimizer.zero_grad(set_to_none=True)
        if epoch % 100 == 0:
            with torch.no_grad():
                test_loss = F.cross_entropy(model(test_x)[:, -1].to(torch.float64), test_y).item()  # CLEAN: eager evaluation of the plain module
            print(f"epoch {epoch} test loss {test_loss:.4f}")

if __name__ == "__main__":
    main()
