"""MAE pretraining (He et al., CVPR 2022), main_pretrain.py style, with the model
and the optimizer step compiled with mode="reduce-overhead"."""
import argparse
import math
import sys
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser("MAE pre-training")
parser.add_argument("--mask_ratio", default=0.75, type=float)
parser.add_argument("--mask_ratio_start", default=0.5, type=float, help="curriculum: ramp the ratio up")
parser.add_argument("--norm_pix_loss", default=True, type=bool)
parser.add_argument("--pix_norm_in_loss", default=True, type=bool)
parser.add_argument("--blr", default=1.5e-4, type=float)
parser.add_argument("--min_lr", default=0.0, type=float)
parser.add_argument("--warmup_epochs", default=40, type=int)
parser.add_argument("--epochs", default=400, type=int)
args = parser.parse_args()

class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.n1, self.qkv, self.proj = nn.LayerNorm(dim), nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.n2, self.mlp, self.heads = nn.LayerNorm(dim), nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim)), heads

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(self.n1(x)).view(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, N, C))
        return x + self.mlp(self.n2(x))

class MaskedAutoencoderViT(nn.Module):
    def __init__(self, img_size=224, patch=16, dim=768, ddim=512, depth=12, ddepth=8):
        super().__init__()
        self.p, L = patch, (img_size // patch) ** 2
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.pos_embed = nn.Parameter(torch.zeros(1, L, dim))
        self.blocks = nn.ModuleList([Block(dim, 12) for _ in range(depth)])
        self.decoder_embed, self.mask_token = nn.Linear(dim, ddim), nn.Parameter(torch.zeros(1, 1, ddim))
        self.decoder_blocks = nn.ModuleList([Block(ddim, 16) for _ in range(ddepth)])
        self.decoder_pred = nn.Linear(ddim, patch ** 2 * 3)
        self.register_buffer("pix_mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("pix_std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))

    def patchify(self, imgs):
        h = w = imgs.shape[2] // self.p
        x = imgs.reshape(imgs.shape[0], 3, h, self.p, w, self.p)
        return torch.einsum("nchpwq->nhwpqc", x).reshape(imgs.shape[0], h * w, self.p ** 2 * 3)

    def random_masking(self, x, mask_ratio):
        N, L, D = x.shape
        len_keep = int(L * (1 - mask_ratio))  # HAZARD: python-scalar
        noise = torch.rand(N, L, device=x.device)  # CLEAN: default-generator RNG traced by Inductor
        ids_shuffle = torch.argsort(noise, dim=1)
        ids_restore = torch.argsort(ids_shuffle, dim=1)
        x_masked = torch.gather(x, 1, ids_shuffle[:, :len_keep].unsqueeze(-1).repeat(1, 1, D))
        mask = torch.ones([N, L], device=x.device)
        mask[:, :len_keep] = 0
        return x_masked, torch.gather(mask, 1, ids_restore), ids_restore

    def forward_loss(self, imgs, pred, mask):
        if args.pix_norm_in_loss:
            imgs.sub_(self.pix_mean).div_(self.pix_std)  # HAZARD: static-address
        target = self.patchify(imgs)
        if args.norm_pix_loss:
            target = (target - target.mean(-1, keepdim=True)) / (target.var(-1, keepdim=True) + 1.e-6) ** .5
        loss = ((pred - target) ** 2).mean(dim=-1)
        print(f"[mae] masked fraction {mask.mean():.3f}")  # HAZARD: host-code
        return (loss * mask).sum() / mask.sum()  # CLEAN: masked mean without boolean indexing

    def forward(self, imgs, mask_ratio=0.75):
        x = self.patch_embed(imgs).flatten(2).transpose(1, 2) + self.pos_embed
        x, mask, ids_restore = self.random_masking(x, mask_ratio)
        for blk in self.blocks:
            x = blk(x)
        x = self.decoder_embed(x)
        x = torch.cat([x, self.mask_token.expand(x.shape[0], ids_restore.shape[1] - x.shape[1], -1)], 1)
        x = torch.gather(x, 1, ids_restore.unsqueeze(-1).repeat(1, 1, x.shape[2]))
        for blk in self.decoder_blocks:
            x = blk(x)
        return self.forward_loss(imgs, self.decoder_pred(x), mask)

def adjust_learning_rate(optimizer, epoch):
    if epoch < args.warmup_epochs:
        lr = args.blr * epoch / args.warmup_epochs
    else:
        lr = args.min_lr + (args.blr - args.min_lr) * 0.5 * (1. + math.cos(math.pi * (epoch - args.warmup_epochs) / (args.epochs - args.warmup_epochs)))
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr  # HAZARD: optimizer

def train(data_loader):
    model = torch.compile(MaskedAutoencoderViT().cuda(), mode="reduce-overhead")
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.blr, betas=(0.9, 0.95))
    opt_step = torch.compile(optimizer.step, mode="reduce-overhead")
    for epoch in range(args.epochs):
        ratio = min(args.mask_ratio, args.mask_ratio_start + (args.mask_ratio - args.mask_ratio_start) * epoch / args.warmup_epochs)
        for it, (samples, _) in enumerate(data_loader):
            adjust_learning_rate(optimizer, it / len(data_loader) + epoch)
            samples = samples.cuda(non_blocking=True)  # CLEAN: eager upload before the compiled call
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(samples, mask_ratio=ratio)
            loss_value = loss.item()  # CLEAN: read eagerly after the compiled call, before backward
            if not math.isfinite(loss_value):
                sys.exit(1)
            loss.backward()
            opt_step()
            optimizer.zero_grad()
