"""Image Matching Challenge -- SuperGlue-lite matcher with log-domain Sinkhorn (research prototype).
Keypoints (<= 1024, zero padded) + 256-d descriptors from a frozen detector; GNN + optimal transport +
mutual check run as one CUDA graph per pair, then OpenCV MAGSAC for the fundamental matrix."""
import math
import cv2
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

N_KPTS, DIM = 1024, 256

def log_optimal_transport(scores, alpha, iters):
    b, m, n = scores.shape
    couplings = torch.cat([torch.cat([scores, alpha.expand(b, m, 1)], -1),
                           torch.cat([alpha.expand(b, 1, n), alpha.expand(b, 1, 1)], -1)], 1)
    norm = -math.log(m + n)
    log_mu, log_nu = torch.full((b, m + 1), norm, device=scores.device), torch.full((b, n + 1), norm, device=scores.device)
    log_mu[:, -1], log_nu[:, -1] = math.log(n) + norm, math.log(m) + norm
    u, v = torch.zeros_like(log_mu), torch.zeros_like(log_nu)
    for _ in range(iters):  # CLEAN: fixed iteration count, no convergence test on the device
        u = log_mu - torch.logsumexp(couplings + v.unsqueeze(1), dim=2)
        v = log_nu - torch.logsumexp(couplings + u.unsqueeze(2), dim=1)
    return couplings + u.unsqueeze(2) + v.unsqueeze(1) - norm

class AttentionalGNN(nn.Module):
    def __init__(self, dim=DIM, layers=6, heads=4):
        super().__init__()
        self.kenc = nn.Sequential(nn.Linear(3, 64), nn.ReLU(), nn.Linear(64, dim))
        self.proj = nn.ModuleList([nn.Linear(dim, 3 * dim) for _ in range(layers)])
        self.merge = nn.ModuleList([nn.Linear(2 * dim, dim) for _ in range(layers)])
        self.final, self.heads = nn.Linear(dim, dim), heads
        self.bin_score = nn.Parameter(torch.tensor(1.0))

    def _attend(self, i, x, src):
        (b, n, d), q = x.shape, self.proj[i](x).chunk(3, -1)[0]
        _, k, v = self.proj[i](src).chunk(3, -1)
        split = lambda t: t.view(b, -1, self.heads, d // self.heads).transpose(1, 2)
        msg = F.scaled_dot_product_attention(split(q), split(k), split(v)).transpose(1, 2).reshape(b, n, d)
        return x + self.merge[i](torch.cat([x, msg], -1))

    def forward(self, d0, d1, k0, k1):
        d0, d1 = d0 + self.kenc(k0), d1 + self.kenc(k1)
        for i in range(len(self.proj)):
            s0, s1 = (d0, d1) if i % 2 == 0 else (d1, d0)   # self, then cross attention
            d0, d1 = self._attend(i, d0, s0), self._attend(i, d1, s1)
        return torch.einsum("bnd,bmd->bnm", self.final(d0), self.final(d1)) / DIM ** 0.5

class PairMatcher:
    def __init__(self, gnn, sinkhorn_iters=20, match_threshold=0.2):
        self.gnn = gnn.cuda().eval()
        self.iters, self.match_threshold = sinkhorn_iters, match_threshold
        self.image_sizes = np.array([[640.0, 480.0], [640.0, 480.0]], dtype=np.float32)
        self.d, self.k = torch.zeros(2, 1, N_KPTS, DIM, device="cuda"), torch.zeros(2, 1, N_KPTS, 3, device="cuda")  # k: x, y, score
        self.valid, self.graph = torch.zeros(2, 1, N_KPTS, dtype=torch.bool, device="cuda"), None

    @torch.no_grad()
    def _match(self):
        wh = torch.from_numpy(self.image_sizes).to(self.k.device)  # HAZARD: pinned-memory
        xy = (self.k[..., :2] - wh[:, None, None] / 2) / (wh.max(1).values[:, None, None, None] * 0.7)
        k = torch.cat([xy, self.k[..., 2:]], -1)
        scores = self.gnn(self.d[0], self.d[1], k[0], k[1])
        scores = scores.masked_fill(~(self.valid[0][:, :, None] & self.valid[1][:, None, :]), -1e4)
        Z = log_optimal_transport(scores, self.gnn.bin_score, self.iters)[:, :-1, :-1]
        max0, max1 = Z.max(2), Z.max(1)
        mutual0 = torch.arange(N_KPTS, device=Z.device)[None] == max1.indices.gather(1, max0.indices)
        mscores0 = torch.where(mutual0, max0.values.exp(), torch.zeros_like(max0.values))
        thr = self.match_threshold  # HAZARD: python-scalar
        valid0 = mutual0 & (mscores0 > thr) & self.valid[0]
        self.matches0 = torch.where(valid0, max0.indices, torch.full_like(max0.indices, -1))  # CLEAN: fixed-shape match vector, unmatched slots set to -1
        self.conf = mscores0[valid0]  # HAZARD: dynamic-shape

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._match()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
            self._match()

    def __call__(self, f0, f1, size0, size1):
        self.image_sizes[0], self.image_sizes[1] = size0, size1
        for i, f in enumerate((f0, f1)):
            n = len(f["keypoints"])
            self.d[i].zero_(), self.k[i].zero_(), self.valid[i].zero_()
            self.d[i, 0, :n].copy_(torch.from_numpy(f["descriptors"]))  # CLEAN: copy_ into the static input, outside the graph
            self.k[i, 0, :n].copy_(torch.from_numpy(np.c_[f["keypoints"], f["scores"]].astype(np.float32)))
            self.valid[i, 0, :n] = True
        if self.graph is None:
            self.capture()
        self.graph.replay()
        return self.matches0[0].cpu().numpy()  # CLEAN: host read after the replay

if __name__ == "__main__":
    matcher = PairMatcher(AttentionalGNN())
    matcher.gnn.load_state_dict(torch.load("superglue_lite_imc.pt", map_location="cuda"))
    feats = np.load("features_test.npz", allow_pickle=True)["feats"].item()
    pairs = [line.strip().split(",") for line in open("test_pairs.csv")][1:]
    with open("submission.csv", "w") as out:
        out.write("sample_id,fundamental_matrix\n")
        for sid, a, b, wa, ha, wb, hb in pairs:
            matcher.match_threshold = 0.1 if "phototourism" in sid else 0.2
            m = matcher(feats[a], feats[b], (float(wa), float(ha)), (float(wb), float(hb)))
            ok, kp0, kp1 = m > -1, feats[a]["keypoints"], feats[b]["keypoints"]
            F_ = cv2.findFundamentalMat(kp0[ok], kp1[m[ok]], cv2.USAC_MAGSAC, 0.25, 0.9999, 10000)[0] if ok.sum() >= 8 else None
            F_ = F_ if F_ is not None else np.eye(3)
            out.write(f"{sid},{' '.join(f'{v:e}' for v in F_.ravel())}\n")
