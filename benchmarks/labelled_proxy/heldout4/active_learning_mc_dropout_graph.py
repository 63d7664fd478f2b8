"""Active-learning acquisition: BALD scores from MC-dropout passes, captured per pool chunk.

The unlabeled pool is streamed through in fixed chunks; the graph runs the
backbone once and T stochastic dropout heads, then writes BALD scores.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class DropoutHead(nn.Module):
    def __init__(self, dim=512, n_classes=20, p=0.3):
        super().__init__()
        self.fc1, self.fc2, self.p = nn.Linear(dim, dim), nn.Linear(dim, n_classes), p

    def forward(self, f):
        h = F.dropout(F.relu(self.fc1(f)), p=self.p, training=True)  # CLEAN: dropout on the default CUDA generator is captured
        return self.fc2(h)


class BALDScorer:
    def __init__(self, backbone: nn.Module, head: DropoutHead, chunk=1024, T=20, img=(3, 96, 96)):
        self.backbone = backbone.eval().cuda()
        self.head = head.cuda()
        self.featurize = torch.compile(self.backbone)
        self.T = T
        self.static_x = torch.zeros(chunk, *img, device="cuda")
        self.static_feats = torch.zeros(chunk, 512, device="cuda")
        self.scores = torch.zeros(chunk, device="cuda")
        self.labelled_rows = []
        self.graph = torch.cuda.CUDAGraph()
        self._rng_snapshot = None

    def _mc_passes(self, feats):
        gen = torch.cuda.default_generators[feats.device.index or 0]
        self._rng_snapshot = gen.clone_state()  # HAZARD: rng
        with torch.random.fork_rng(devices=[feats.device]):  # CLEAN: reads and restores the same RNG state
            probs = torch.stack([F.softmax(self.head(feats), -1) for _ in range(self.T)])
        mean = probs.mean(0)
        entropy = -(mean * mean.clamp_min(1e-12).log()).sum(-1)
        exp_ent = -(probs * probs.clamp_min(1e-12).log()).sum(-1).mean(0)
        return entropy - exp_ent

    def _score_chunk(self):
        feats = self.featurize(self.static_x)  # HAZARD: api-misuse
        bald = self._mc_passes(feats)
        if torch.isnan(bald).any():  # HAZARD: dynamic-control-flow
            bald = torch.nan_to_num(bald, nan=0.0)
        done = torch.tensor(self.labelled_rows, dtype=torch.long, device="cuda")  # HAZARD: host-sync
        bald = bald.index_fill(0, done, float("-inf"))
        self.scores.copy_(torch.where(bald.isfinite(), bald, torch.full_like(bald, -1e9)))  # CLEAN: elementwise select, fixed shape

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._mc_passes(self.static_feats)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self._score_chunk()

    @torch.no_grad()
    def acquire(self, pool_loader, budget):
        all_scores, all_ids = [], []
        for ids, x in pool_loader:
            n = x.shape[0]
            self.static_x[:n].copy_(x, non_blocking=True)
            self.static_x[n:].zero_()
            self.graph.replay()
            all_scores.append(self.scores[:n].clone())
            all_ids.append(ids)
        scores, ids = torch.cat(all_scores), torch.cat(all_ids)
        top = torch.topk(scores, budget).indices
        return ids[top.cpu()].tolist()  # CLEAN: host read after all replays, outside the capture
