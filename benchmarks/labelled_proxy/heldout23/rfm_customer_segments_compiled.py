"""RFM customer segmentation: autoencoder embeddings + segment assignment.

Marketing data-science job.  pandas builds recency/frequency/monetary features
from the order log; a small autoencoder (trained elsewhere) embeds customers, and a
Segmenter object dispatches to compiled stages by name with getattr.
"""
import numpy as np
import pandas as pd
import torch
import torch.nn as nn

dev = "cuda"
CHUNK = 4096
N_SEG = 8

orders = pd.read_parquet("orders_2y.parquet")
snapshot = orders.order_date.max() + pd.Timedelta(days=1)
rfm = orders.groupby("customer_id").agg(
    recency=("order_date", lambda d: (snapshot - d.max()).days),
    frequency=("order_id", "nunique"),
    monetary=("amount", "sum"),
    tenure=("order_date", lambda d: (snapshot - d.min()).days))
feats = np.log1p(rfm.to_numpy(np.float64)).astype(np.float32)
feats = (feats - feats.mean(0)) / feats.std(0)


class RFMEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 8))
        self.centroids = nn.Parameter(torch.randn(N_SEG, 8))

    def forward(self, x):
        x.clamp_(-5.0, 5.0)  # HAZARD: static-address
        z = self.enc(x)
        return torch.cdist(z, self.centroids)


class RFMEncoderSafe(RFMEncoder):
    def forward(self, x):
        z = self.enc(torch.clamp(x, -5.0, 5.0))  # CLEAN: out-of-place clamp, input left untouched
        return torch.cdist(z, self.centroids)


class Segmenter:
    def __init__(self, enc):
        enc = enc.to(dev).eval()
        self.stage_embed = torch.compile(enc, mode="reduce-overhead")
        self.stage_assign = torch.compile(self._assign, mode="reduce-overhead")
        self.stage_profile = torch.compile(self._profile, mode="max-autotune-no-cudagraphs")

    def _assign(self, d):
        seg = d.argmin(1)  # CLEAN: fixed-shape reduction
        names = seg.tolist()  # HAZARD: host-sync
        return seg, names

    def _profile(self, d, seg_id):
        m = d.argmin(1) == seg_id
        n = int(m.sum())  # CLEAN: no-cudagraphs compile, a graph break but no CUDA graph
        return n

    def _share_vip(self, d):
        vip = d.argmin(1) == 0
        return int(vip.sum())  # HAZARD: host-sync

    def run(self, stage, *args):
        return getattr(self, "stage_" + stage)(*args)


if __name__ == "__main__":
    enc = RFMEncoder()
    enc.load_state_dict(torch.load("rfm_ae_encoder.pt"))
    seg = Segmenter(enc)
    seg.stage_vip = torch.compile(seg._share_vip, mode="reduce-overhead")
    X = torch.from_numpy(feats).to(dev)
    labels, vip = [], 0
    with torch.no_grad():
        for i in range(0, len(X), CHUNK):
            d = seg.run("embed", X[i:i + CHUNK]).clone()
            s, names = seg.run("assign", d)  # HAZARD: dynamic-shape
            labels.extend(names)
            vip += seg.run("vip", d)
            seg.run("profile", d, 3)
    rfm["segment"] = labels
    rfm.groupby("segment")[["recency", "frequency", "monetary"]].median().to_csv("segment_profile.csv")
