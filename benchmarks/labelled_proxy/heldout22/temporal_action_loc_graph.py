"""ActionFormer-style temporal action localisation over pre-extracted I3D features, configured with an
mmaction-like config dict. The head runs as one CUDA graph for the padded max_seq_len; NMS stays eager."""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("tal")

cfg = dict(
    model=dict(type="ActionFormerLite", in_dim=2048, embd_dim=256, num_classes=20, n_levels=4),
    test_cfg=dict(max_seq_len=2304, batch_size=4, min_score=0.05, nms_sigma=0.5),
)

MODELS = {}

def build_model(model_cfg):
    args = dict(model_cfg)
    return MODELS[args.pop("type")](**args)

class ActionFormerLite(nn.Module):
    def __init__(self, in_dim, embd_dim, num_classes, n_levels):
        super().__init__()
        self.embd = nn.Conv1d(in_dim, embd_dim, 3, padding=1)
        self.levels = nn.ModuleList([
            nn.Sequential(nn.Conv1d(embd_dim, embd_dim, 3, padding=1, groups=embd_dim), nn.GELU(),
                          nn.Conv1d(embd_dim, embd_dim, 1)) for _ in range(n_levels)])
        self.cls_head = nn.Conv1d(embd_dim, num_classes, 3, padding=1)
        self.reg_head = nn.Conv1d(embd_dim, 2, 3, padding=1)

    def forward(self, feats, lengths):
        B, _, T = feats.shape
        mask = torch.arange(T, device=feats.device)[None] < lengths[:, None]
        valid = feats.transpose(1, 2)[mask]  # HAZARD: dynamic-shape
        feats = (feats - valid.mean(0)[None, :, None]) / (valid.std(0)[None, :, None] + 1e-5)
        x = self.embd(feats) * mask[:, None].float()
        cls_out, reg_out = [], []
        for lvl, enc in enumerate(self.levels):
            m = mask[:, :: 2 ** lvl]
            h = (x + enc(x)) * m[:, None].float()
            cls_out.append(self.cls_head(h).masked_fill(~m[:, None], -1e4))  # CLEAN: masked_fill keeps the shape
            reg_out.append(F.relu(self.reg_head(h)) * 2 ** lvl)
            x = F.max_pool1d(h, 2)
        return torch.cat(cls_out, -1).sigmoid(), torch.cat(reg_out, -1)

MODELS["ActionFormerLite"] = ActionFormerLite

class TALInferencer:
    def __init__(self, cfg):
        self.model = build_model(cfg["model"]).cuda().eval()
        self.test_cfg = cfg["test_cfg"]
        bs, T = self.test_cfg["batch_size"], self.test_cfg["max_seq_len"]
        self.feats = torch.zeros(bs, cfg["model"]["in_dim"], T, device="cuda")
        self.video_lengths = [T] * bs
        self.graph = torch.cuda.CUDAGraph()

    def _forward(self):
        lengths = torch.tensor(self.video_lengths, device="cuda")  # HAZARD: host-sync
        scores, offsets = self.model(self.feats, lengths)
        if scores.max() < self.test_cfg["min_score"]:  # HAZARD: dynamic-control-flow
            log.warning("no confident segment in this batch")
        return scores, offsets

    @torch.no_grad()
    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._forward()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
            log.info("capturing TAL head for max_seq_len=%d", self.test_cfg["max_seq_len"])  # CLEAN: plain log, no tensor
            self.static_out = self._forward()

    @torch.no_grad()
    def __call__(self, batch_feats):
        self.video_lengths = [f.shape[-1] for f in batch_feats]
        for i, f in enumerate(batch_feats):
            self.feats[i].zero_()
            self.feats[i, :, : f.shape[-1]].copy_(f)  # CLEAN: copy_ into the captured input
        self.graph.replay()
        scores, offsets = self.static_out
        return soft_nms(scores.cpu(), offsets.cpu(), self.test_cfg["nms_sigma"])  # CLEAN: eager, after replay

def soft_nms(scores, offsets, sigma):
    best, labels = scores.max(1)
    order = best.argsort(dim=-1, descending=True)[:, :200]
    return [(labels[b, order[b]], best[b, order[b]], offsets[b][:, order[b]]) for b in range(scores.shape[0])]

if __name__ == "__main__":
    tal = TALInferencer(cfg)
    tal.capture()
    videos = [torch.randn(2048, n, device="cuda") for n in (812, 2304, 1500, 96)]
    segments = tal(videos)
