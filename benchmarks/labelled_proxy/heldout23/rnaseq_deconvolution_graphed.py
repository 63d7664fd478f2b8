"""Bulk RNA-seq cell-type deconvolution (Scaden-like MLP ensemble member).

Notebook turned into a job: pandas for the count matrix, scikit-learn for the
log/scale step, torch for the model.  Encoder and proportion head are graphed
with torch.cuda.make_graphed_callables for the training loop.
"""
import numpy as np
import pandas as pd
import torch
import torch.nn as nn
from sklearn.preprocessing import MinMaxScaler

dev = torch.device("cuda")
counts = pd.read_csv("pseudobulk_counts.csv", index_col=0)      # samples x genes
props = pd.read_csv("pseudobulk_props.csv", index_col=0)        # samples x cell types
genes = counts.columns.tolist()
marker_table = pd.read_csv("markers.tsv", sep="\t")
MARKERS = [genes.index(gn) for gn in marker_table.gene if gn in genes]

X = MinMaxScaler().fit_transform(np.log2(counts.to_numpy(np.float32) + 1.0))
Y = props.to_numpy(np.float32)
BATCH = 128
N_GENES, N_TYPES = X.shape[1], Y.shape[1]


class Encoder(nn.Module):
    def __init__(self, n_in, marker_idx):
        super().__init__()
        self.marker_genes = marker_idx
        self.register_buffer("marker_idx", torch.tensor(marker_idx))
        self.body = nn.Sequential(nn.Linear(n_in, 512), nn.ReLU(), nn.Dropout(0.1),
                                  nn.Linear(512, 256), nn.ReLU())
        self.marker_proj = nn.Linear(len(marker_idx), 256)

    def forward(self, x):
        libsize = x.sum(1).mean().item()  # HAZARD: host-sync
        x = x / max(libsize, 1e-6) * x.shape[1]
        m = x[:, self.marker_genes]  # HAZARD: host-sync
        return self.body(x) + self.marker_proj(m)


class MarkerEncoder(Encoder):          # v2 encoder, used by the nightly job
    def forward(self, x):
        m = x.index_select(1, self.marker_idx)  # CLEAN: gather with a CUDA index buffer
        return self.body(x) + self.marker_proj(m)


class PropHead(nn.Module):
    def __init__(self, n_types):
        super().__init__()
        self.fc = nn.Linear(256, n_types)

    def forward(self, h):
        return torch.softmax(self.fc(h), dim=1)


encoder = Encoder(N_GENES, MARKERS).to(dev)
head = PropHead(N_TYPES).to(dev)
act_stats = {}
encoder.register_forward_hook(lambda m, i, o: act_stats.__setitem__("enc", o.detach().mean()))  # HAZARD: api-misuse

sx = torch.randn(BATCH, N_GENES, device=dev)
sh = torch.randn(BATCH, 256, device=dev, requires_grad=True)
with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
    g_encoder, g_head = torch.cuda.make_graphed_callables((encoder, head), ((sx,), (sh,)))

head.register_forward_hook(lambda m, i, o: None)  # CLEAN: hook registered after graphing
opt = torch.optim.Adam(list(encoder.parameters()) + list(head.parameters()), lr=1e-4)
Xt = torch.from_numpy(X).pin_memory()
Yt = torch.from_numpy(Y).pin_memory()

for epoch in range(30):
    perm = torch.randperm(len(Xt))
    for i in range(0, len(Xt) - BATCH + 1, BATCH):
        idx = perm[i:i + BATCH]
        xb = Xt[idx].to(dev, non_blocking=True)
        yb = Yt[idx].to(dev, non_blocking=True)
        pred = g_head(g_encoder(xb))
        loss = torch.abs(pred - yb).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    print(epoch, loss.item())  # CLEAN: eager read after the graphed backward

torch.save({"enc": encoder.state_dict(), "head": head.state_dict()}, "scaden_m256.pt")
