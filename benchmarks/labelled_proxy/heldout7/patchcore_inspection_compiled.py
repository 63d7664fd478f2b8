"""PatchCore visual inspection on an injection-moulding line.

Mid-level backbone features of each part image are compared against a coreset memory
bank of defect-free patches; the nearest-neighbour distance map is the anomaly map.
The station dispatches bus messages by name and compiles the scorer with the backend
chosen in the station config.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

BACKENDS = {
    "graphs": dict(backend="cudagraphs"),
    "inductor": dict(mode="reduce-overhead"),
    "plain": dict(mode="default"),
}


class PatchCore(nn.Module):
    def __init__(self, backbone, bank_size=16384, d_feat=1536, d=384, threshold=2.5):
        super().__init__()
        self.backbone = backbone.eval()                    # returns (layer2, layer3) feature maps
        self.register_buffer("proj", torch.randn(d_feat, d) / d ** 0.5)
        self.register_buffer("bank", torch.zeros(bank_size, d))
        self.threshold = threshold

    def embed(self, img):
        f2, f3 = self.backbone(img)
        f2 = F.avg_pool2d(f2, 3, 1, 1)
        f3 = F.interpolate(F.avg_pool2d(f3, 3, 1, 1), size=f2.shape[-2:], mode="bilinear")
        f = torch.cat([f2, f3], 1)
        return f.flatten(2).transpose(1, 2) @ self.proj, f2.shape[-2:]

    def score(self, img):
        feats, (h, w) = self.embed(img)
        dist = torch.cdist(feats, self.bank.unsqueeze(0).expand(feats.shape[0], -1, -1)).amin(-1)
        amap = dist.view(-1, 1, h, w)
        s = amap.amax((1, 2, 3))
        if (s > self.threshold).any():  # HAZARD: dynamic-control-flow
            amap = F.avg_pool2d(amap, 5, 1, 2)
        print(f"max anomaly score in batch {s.max():.3f}")  # HAZARD: host-code
        ranking = s.argsort(descending=True).tolist()  # HAZARD: host-sync
        amap = F.interpolate(amap, size=img.shape[-2:], mode="bilinear")
        return amap, s, ranking


class InspectionStation:
    def __init__(self, model, cfg):
        self.model = model.cuda()
        self.scorer = torch.compile(self.model.score, **BACKENDS[cfg.get("backend", "inductor")])
        self.review_scorer = torch.compile(self.model.score, **BACKENDS["plain"])
        self.reject_gate = cfg.get("reject_gate", 3.0)

    def handle(self, msg):
        with torch.no_grad():
            return getattr(self, "on_" + msg["type"])(msg)

    def on_parts(self, msg):
        amap, s, ranking = self.scorer(msg["images"].cuda(non_blocking=True))
        rejects = (s > self.reject_gate).cpu()  # CLEAN: eager read right after the scorer returned
        return {"reject": rejects.tolist(), "worst_first": ranking}

    def on_review(self, msg):
        amap, s, _ = self.review_scorer(msg["images"].cuda())  # CLEAN: default compile, no CUDA graphs
        return {"maps": amap.cpu(), "scores": s.cpu()}

    def on_refit(self, msg):
        coreset = greedy_coreset(self.embed_all(msg["good_images"]), self.model.bank.shape[0])
        self.model.bank = coreset  # HAZARD: static-address

    def on_extend(self, msg):
        extra = greedy_coreset(self.embed_all(msg["good_images"]), msg["n"])
        self.model.bank[-extra.shape[0]:].copy_(extra)  # CLEAN: in-place update keeps the buffer address

    @torch.no_grad()
    def embed_all(self, images):
        return torch.cat([self.model.embed(x.cuda())[0].flatten(0, 1) for x in images.split(16)])


@torch.no_grad()
def greedy_coreset(feats, n, chunk=4096):
    idx = [torch.randint(len(feats), (1,)).item()]
    mind = torch.cdist(feats, feats[idx]).squeeze(1)
    for _ in range(n - 1):
        nxt = int(mind.argmax())
        idx.append(nxt)
        mind = torch.minimum(mind, torch.cdist(feats, feats[nxt:nxt + 1]).squeeze(1))
    return feats[idx].clone()
