"""Zero-shot image tagging server (CLIP-style dual encoder) with a dynamic request batcher. The image tower
and the similarity head are compiled with mode="max-autotune" (CUDA graphs); label prompts are embedded
once per tenant vocabulary."""
import math
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

PROMPT_TEMPLATES = ("a photo of a {}.", "a close-up photo of the {}.", "a low resolution photo of a {}.")

@dataclass
class Request:
    image: torch.Tensor
    arrived: float

class VisualTower(nn.Module):
    def __init__(self, width=768, embed_dim=512, patch=32):
        super().__init__()
        self.patch = nn.Conv2d(3, width, patch, patch)
        self.blocks = nn.Sequential(*[nn.Sequential(nn.LayerNorm(width), nn.Linear(width, width), nn.GELU())
                                      for _ in range(6)])
        self.proj = nn.Linear(width, embed_dim)
        self.last_call = 0.0

    def forward(self, x):
        self.last_call = time.monotonic()  # HAZARD: host-code
        tokens = self.patch(x).flatten(2).transpose(1, 2)
        return self.proj(self.blocks(tokens).mean(1))

class ZeroShotHead(nn.Module):
    def __init__(self, text_feats, logit_scale=100.0):
        super().__init__()
        self.register_buffer("text_feats", F.normalize(text_feats, dim=-1))
        self.logit_scale = nn.Parameter(torch.tensor(math.log(logit_scale)))

    def forward(self, img_feats):
        scale = self.logit_scale.exp().item()  # HAZARD: host-sync
        return (scale * F.normalize(img_feats, dim=-1) @ self.text_feats.t()).softmax(-1)

def embed_prompts(labels, text_encoder):
    with torch.no_grad():
        feats = torch.stack([text_encoder([t.format(l) for t in PROMPT_TEMPLATES]).mean(0) for l in labels])
    return F.normalize(feats, dim=-1)

class TaggingServer:
    def __init__(self, labels, text_encoder, buckets=(8, 16, 32), max_wait_s=0.005):
        self.text_encoder, self.buckets, self.max_wait_s = text_encoder, buckets, max_wait_s
        self.visual = torch.compile(VisualTower().cuda().eval(), mode="max-autotune")
        self.head = ZeroShotHead(embed_prompts(labels, text_encoder)).cuda().eval()
        self.score = torch.compile(self.head, mode="max-autotune")
        self.queue = []

    def set_vocabulary(self, labels):
        self.head.text_feats = embed_prompts(labels, self.text_encoder)  # HAZARD: static-address

    def refresh_prompts(self, labels):
        self.head.text_feats.copy_(embed_prompts(labels, self.text_encoder))  # CLEAN: copy_ keeps the buffer's address

    def submit(self, image):
        self.queue.append(Request(image, time.monotonic()))
        timed_out = time.monotonic() - self.queue[0].arrived > self.max_wait_s
        if len(self.queue) >= self.buckets[-1] or timed_out:
            batch, self.queue = self.queue[: self.buckets[-1]], self.queue[self.buckets[-1]:]
            return self.flush(batch, timed_out)
        return None

    @torch.no_grad()
    def flush(self, requests, timed_out):
        imgs = torch.stack([r.image for r in requests]).cuda(non_blocking=True)
        if timed_out:
            feats = self.visual(imgs)  # HAZARD: dynamic-shape
        else:
            bs = next(b for b in self.buckets if b >= len(imgs))
            imgs = F.pad(imgs, (0, 0, 0, 0, 0, 0, 0, bs - len(imgs)))
            feats = self.visual(imgs)  # CLEAN: padded up to a captured bucket size
        probs = self.score(feats.clone())[: len(requests)]  # CLEAN: graph-owned output cloned before the hand-over
        top_p, top_i = probs.topk(5, dim=-1)
        return list(zip(top_p.cpu().tolist(), top_i.cpu().tolist()))

if __name__ == "__main__":
    fake_text_encoder = lambda prompts: torch.randn(len(prompts), 512, device="cuda")
    server = TaggingServer(["dog", "cat", "beach", "mountain", "car"], fake_text_encoder)
    for i in range(100):
        out = server.submit(torch.rand(3, 224, 224).pin_memory())
        if i == 50:
            server.set_vocabulary(["forest", "city", "snow", "desert", "lake"])
