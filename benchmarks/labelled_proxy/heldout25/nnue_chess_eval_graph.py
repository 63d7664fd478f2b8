"""Batched NNUE evaluation for the engine's GPU search helper (HalfKP features).

The alpha-beta workers collect leaf positions into batches of 256; feature indices are
produced by the C++ move generator and handed over as an int32 array. The evaluation is
captured as one CUDA graph; scores come back in centipawns.
"""
import numpy as np
import torch
import torch.nn as nn

N_FEATURES = 41024
BATCH = 256
MAX_ACTIVE = 32
MATE_SCORE = 3000.0


class NNUE(nn.Module):
    def __init__(self, l1=256):
        super().__init__()
        self.ft = nn.Embedding(N_FEATURES, l1)
        self.threat = nn.Embedding(64, l1)
        self.l1 = nn.Linear(2 * l1, 32)
        self.l2 = nn.Linear(32, 32)
        self.out = nn.Linear(32, 1)

    def forward(self, white_idx, black_idx, stm):
        w = self.ft(white_idx).sum(1)
        b = self.ft(black_idx).sum(1)
        acc = torch.where(stm[:, None] > 0, torch.cat([w, b], 1), torch.cat([b, w], 1))  # CLEAN: side-to-move select on device
        x = torch.clamp(acc, 0.0, 1.0)
        x = torch.clamp(self.l1(x), 0.0, 1.0)
        x = torch.clamp(self.l2(x), 0.0, 1.0)
        return self.out(x).squeeze(-1) * 600.0


class GpuEvaluator:
    def __init__(self, net, threat_squares):
        self.net = net.cuda().eval()
        self.threat_ids = list(threat_squares)     # squares attacked by pinned pieces
        self.white = torch.zeros(BATCH, MAX_ACTIVE, dtype=torch.long, device="cuda")
        self.black = torch.zeros_like(self.white)
        self.stm = torch.zeros(BATCH, device="cuda")
        self.g = torch.cuda.CUDAGraph()

    @torch.no_grad()
    def _evaluate(self):
        cp = self.net(self.white, self.black, self.stm)
        bias = self.net.threat.weight[self.threat_ids].sum()  # HAZARD: host-sync
        cp = cp + 0.01 * bias
        if (cp.abs() > MATE_SCORE).any():  # HAZARD: dynamic-control-flow
            cp = cp.clamp(-MATE_SCORE, MATE_SCORE)
        quiet = cp[cp.abs() < 50.0]  # HAZARD: dynamic-shape
        draw_bias = quiet.numel() / BATCH
        wdl = torch.sigmoid(cp / 410.0)
        return cp, wdl, draw_bias

    def capture(self):
        with torch.cuda.graph(self.g):  # HAZARD: api-misuse
            self.cp, self.wdl, self.draw_bias = self._evaluate()

    def evaluate(self, white_np, black_np, stm_np):
        self.white.copy_(torch.from_numpy(white_np))  # CLEAN: eager copy into the static input before replay
        self.black.copy_(torch.from_numpy(black_np))
        self.stm.copy_(torch.from_numpy(stm_np))
        self.g.replay()
        return self.cp


def search_batch(evaluator, leaves):
    white = np.stack([l.white_features for l in leaves]).astype(np.int64)
    black = np.stack([l.black_features for l in leaves]).astype(np.int64)
    stm = np.array([1.0 if l.white_to_move else -1.0 for l in leaves], dtype=np.float32)
    cp = evaluator.evaluate(white, black, stm)
    scores = cp.tolist()  # CLEAN: eager readback for the C++ search, after replay
    for leaf, s in zip(leaves, scores):
        leaf.static_eval = int(s)
    return scores


def build(weights_path, threat_squares):
    net = NNUE()
    net.load_state_dict(torch.load(weights_path, map_location="cpu"))
    ev = GpuEvaluator(net, threat_squares)
    ev.capture()
    return ev
