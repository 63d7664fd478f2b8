"""Saliency-guided token dropping for a video ViT classifier.

Token selection and background merging are compiled with mode="max-autotune";
the keep ratio follows a curriculum that is raised every epoch.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

logger = logging.getLogger("vit.tokendrop")
KEEP_RATIO = 0.3


@torch.compile(mode="max-autotune")
def drop_tokens(tokens, pos_embed, saliency):
    b, n, d = tokens.shape
    n_keep = int(n * KEEP_RATIO)  # HAZARD: python-scalar
    noise = torch.rand(b, n, device=tokens.device)  # CLEAN: device RNG on the default generator
    order = torch.argsort(saliency + 0.05 * noise, dim=1, descending=True)
    keep = order[:, :n_keep]
    x = torch.gather(tokens + pos_embed, 1, keep[..., None].expand(-1, -1, d))  # CLEAN: gather with a fixed number of indices
    print("kept tokens", x.shape)  # CLEAN: printing a static shape does not break the graph (measured)
    return x, keep


@torch.compile(mode="max-autotune")
def merge_background(tokens, saliency, thresh=0.05):
    bg = saliency < thresh
    if bg.sum() == 0:  # HAZARD: dynamic-control-flow
        return tokens
    summary = tokens[bg].mean(0)  # HAZARD: dynamic-shape
    logger.info("merged background tokens into one summary")  # HAZARD: host-code
    return torch.where(bg[..., None], summary, tokens)


@torch.compile(mode="max-autotune-no-cudagraphs")
def eval_pool(tokens, valid):
    return tokens[valid].mean(0, keepdim=True)  # CLEAN: compiled without CUDA graphs


class TokenDropViT(nn.Module):
    def __init__(self, dim=768, depth=12, heads=12, num_classes=400, tubelet=(2, 16, 16), n_tokens=1568):
        super().__init__()
        self.patch = nn.Conv3d(3, dim, kernel_size=tubelet, stride=tubelet)
        self.pos_embed = nn.Parameter(torch.zeros(1, n_tokens, dim))
        self.saliency = nn.Linear(dim, 1)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, depth)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, video):
        tokens = self.patch(video).flatten(2).transpose(1, 2)
        sal = self.saliency(tokens.detach()).squeeze(-1).sigmoid()
        if self.training:
            tokens, _ = drop_tokens(tokens, self.pos_embed, sal)
        else:
            tokens = merge_background(tokens + self.pos_embed, sal)
        return self.head(self.blocks(tokens).mean(1))


def set_keep_ratio(epoch, total_epochs):
    global KEEP_RATIO
    KEEP_RATIO = 0.3 + 0.4 * epoch / max(total_epochs - 1, 1)


def train(model, loader, opt, epochs):
    for epoch in range(epochs):
        set_keep_ratio(epoch, epochs)
        for video, label in loader:
            loss = F.cross_entropy(model(video.cuda(non_blocking=True)), label.cuda())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
