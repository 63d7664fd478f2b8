"""Detectron2-style trainer for a human-object interaction (HOI) pair head on HICO-DET. RoI features and
boxes come from a frozen detector, padded to MAX_HUMANS x MAX_OBJECTS; run_step is captured whole."""
import torch
import torch.nn as nn
import torch.nn.functional as F

class CfgNode(dict):
    __getattr__ = dict.__getitem__

def get_cfg():
    return CfgNode(
        MODEL=CfgNode(ROI_HOI_HEAD=CfgNode(NAME="PairwiseHOIHead", NUM_VERBS=117, FEAT_DIM=1024, BOX_JITTER=0.05)),
        SOLVER=CfgNode(BASE_LR=1e-4, WEIGHT_DECAY=1e-4, MAX_ITER=20000, CHECKPOINT_PERIOD=5000, CLIP=1.0),
        INPUT=CfgNode(MAX_HUMANS=16, MAX_OBJECTS=32), SEED=7)

ROI_HOI_HEAD_REGISTRY = {}

def register(cls):
    ROI_HOI_HEAD_REGISTRY[cls.__name__] = cls
    return cls

@register
class PairwiseHOIHead(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = cfg.MODEL.ROI_HOI_HEAD
        self.box_jitter = c.BOX_JITTER
        self.jitter_gen = torch.Generator(device="cuda")
        self.jitter_gen.manual_seed(cfg.SEED)
        self.h_proj = nn.Linear(c.FEAT_DIM, 512)
        self.o_proj = nn.Linear(c.FEAT_DIM, 512)
        self.spatial = nn.Linear(8, 512)
        self.verb = nn.Linear(512, c.NUM_VERBS)

    def forward(self, h_feat, o_feat, h_box, o_box):
        H, O = h_box.shape[1], o_box.shape[1]
        if self.training:
            wh = (h_box[..., 2:] - h_box[..., :2]).repeat(1, 1, 2)
            noise = torch.randn(h_box.shape, device=h_box.device, generator=self.jitter_gen)  # HAZARD: rng
            h_box = h_box + noise * self.box_jitter * wh
        pair = self.h_proj(h_feat)[:, :, None] + self.o_proj(o_feat)[:, None]
        geo = torch.cat([h_box[:, :, None].expand(-1, -1, O, -1), o_box[:, None].expand(-1, H, -1, -1)], -1)
        pair = F.relu(pair + self.spatial(geo))
        pair = F.dropout(pair, 0.1, self.training)  # CLEAN: default-generator dropout is capturable
        return self.verb(pair)

class GraphedHOITrainer:
    def __init__(self, cfg, model):
        self.cfg = cfg
        self.model = model.cuda().train()
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.SOLVER.BASE_LR,
                                           weight_decay=cfg.SOLVER.WEIGHT_DECAY)
        self.iter = 0
        self.storage = {}
        self.graph = torch.cuda.CUDAGraph()

    def run_step(self):
        h_feat, o_feat, h_box, o_box, pair_mask, verbs = self.static_batch
        logits = self.model(h_feat, o_feat, h_box, o_box)
        loss = F.binary_cross_entropy_with_logits(logits, verbs, reduction="none").mean(-1)
        loss = (loss * pair_mask).sum() / pair_mask.sum().clamp_min(1.0)  # CLEAN: masked mean, fixed shape
        self.optimizer.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.SOLVER.CLIP)  # CLEAN: clip_grad_norm_ is capturable
        self.optimizer.step()  # HAZARD: optimizer
        self._write_metrics({"loss_verb": loss})
        self.iter += 1  # HAZARD: host-code
        return loss.detach()

    def _write_metrics(self, loss_dict):
        metrics = {k: v.detach().cpu().item() for k, v in loss_dict.items()}  # HAZARD: host-sync
        for k, v in metrics.items():
            self.storage.setdefault(k, []).append(v)

    def capture(self, first_batch):
        self.static_batch = [t.clone() for t in first_batch]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self.run_step()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph):
            self.static_loss = self.run_step()

    def train(self, loader):
        for batch in loader:
            for dst, src in zip(self.static_batch, batch):
                dst.copy_(src)  # CLEAN: copy_ into the captured batch
            self.graph.replay()
            if self.iter % self.cfg.SOLVER.CHECKPOINT_PERIOD == 0:
                torch.save(self.model.state_dict(), f"model_{self.iter:07d}.pth")
            if self.iter >= self.cfg.SOLVER.MAX_ITER:
                break

def fake_loader(cfg, n=100, b=8):
    H, O = cfg.INPUT.MAX_HUMANS, cfg.INPUT.MAX_OBJECTS
    for _ in range(n):
        yield [torch.randn(b, H, 1024, device="cuda"), torch.randn(b, O, 1024, device="cuda"),
               torch.rand(b, H, 4, device="cuda"), torch.rand(b, O, 4, device="cuda"),
               torch.ones(b, H, O, device="cuda"), torch.randint(0, 2, (b, H, O, 117), device="cuda").float()]

if __name__ == "__main__":
    cfg = get_cfg()
    model = ROI_HOI_HEAD_REGISTRY[cfg.MODEL.ROI_HOI_HEAD.NAME](cfg)
    trainer = GraphedHOITrainer(cfg, model)
    trainer.capture(next(fake_loader(cfg)))
    trainer.train(fake_loader(cfg))
