"""Ray Serve deployment of an image-moderation classifier.

`@serve.batch` collects up to 16 requests; encoder and head are compiled through a
`functools.partial(torch.compile, mode="reduce-overhead")` helper. The deployment
returns per-request labels plus the embedding norm used by the abuse team's
out-of-distribution dashboard.
"""
import functools

import timm
import torch
import torch.nn as nn
from ray import serve

rcompile = functools.partial(torch.compile, mode="reduce-overhead")
LABELS = ["safe", "suggestive", "explicit", "violent", "hateful_symbol"]
BUCKET = 16


class Encoder(nn.Module):
    def __init__(self, backbone: nn.Module, dim=768):
        super().__init__()
        self.backbone, self.proj = backbone, nn.Linear(dim, 256)

    def forward(self, x):
        return nn.functional.normalize(self.proj(self.backbone(x)), dim=-1) * 16.0


class Head(nn.Module):
    def __init__(self, n_cls, reject_below=0.35):
        super().__init__()
        self.fc = nn.Linear(256, n_cls)
        self.reject_below = reject_below

    def forward(self, emb):
        probs = self.fc(emb).softmax(-1)
        if probs.max() < self.reject_below:  # HAZARD: dynamic-control-flow
            probs = torch.full_like(probs, 1.0 / probs.size(-1))
        labels = probs.argmax(-1).tolist()  # HAZARD: host-sync
        return probs, labels


@serve.deployment(ray_actor_options={"num_gpus": 1}, max_ongoing_requests=64)
class ModerationModel:
    def __init__(self, weights_path: str):
        backbone = timm.create_model("convnext_tiny", pretrained=False, num_classes=0)
        backbone.load_state_dict(torch.load(weights_path, map_location="cpu"))
        self.encoder = rcompile(Encoder(backbone).cuda().eval())
        self.head = rcompile(Head(len(LABELS)).cuda().eval())
        self.shadow_encoder = torch.compile(Encoder(backbone).cuda().eval())
        self._warm()

    @torch.inference_mode()
    def _warm(self):
        x = torch.zeros(BUCKET, 3, 224, 224, device="cuda")
        for _ in range(3):
            emb = self.encoder(x)  # CLEAN: padded bucket shape
            self.head(emb.clone())

    @serve.batch(max_batch_size=BUCKET, batch_wait_timeout_s=0.01)
    async def __call__(self, images: list[torch.Tensor]):
        x = torch.stack(images).cuda(non_blocking=True)
        with torch.inference_mode():
            emb = self.encoder(x)  # HAZARD: dynamic-shape
            probs, labels = self.head(emb.clone())  # CLEAN: hand-over cloned before the head runs
            ood = emb.norm(dim=-1).cpu()  # HAZARD: static-address
            probs = probs.cpu()
        return [
            {"label": LABELS[l], "confidence": float(p.max()), "ood_norm": float(o)}
            for l, p, o in zip(labels, probs, ood)
        ]

    @torch.inference_mode()
    def shadow_score(self, images: list[torch.Tensor]):
        x = torch.stack(images).cuda()
        return self.shadow_encoder(x).norm(dim=-1).cpu()  # CLEAN: default torch.compile, any batch size


app = ModerationModel.bind("/models/moderation/convnext_tiny_v5.pt")
