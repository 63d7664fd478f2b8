"""30-day readmission risk from discharge summaries' structured fields.

Data-science team code: pandas feature pipeline with a scikit-learn ColumnTransformer,
then a small PyTorch tabular model.  Embedding block, trunk and calibrated head are
graphed together; the head's temperature is refit on the validation set each week.
"""
import random
import numpy as np
import pandas as pd
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.compose import ColumnTransformer
from sklearn.preprocessing import OneHotEncoder, StandardScaler

NUM = ["age", "los_days", "n_prior_adm", "n_meds", "charlson"]
CAT = ["payer", "discharge_to", "admit_type"]
dev = "cuda"

df = pd.read_parquet("discharges.parquet")
ct = ColumnTransformer([("num", StandardScaler(), NUM),
                        ("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=False), CAT)])
X = ct.fit_transform(df[NUM + CAT]).astype(np.float32)
y = df["readmit_30d"].to_numpy(np.float32)
D = X.shape[1]
B = 256


class FeatureDropout(nn.Module):
    def __init__(self, p=0.1):
        super().__init__()
        self.p_drop = p

    def forward(self, x):
        if random.random() < self.p_drop:  # HAZARD: host-code
            x = x * 0.0
        return F.dropout(x, 0.1, self.training)  # CLEAN: default CUDA generator, captured


class Trunk(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, 128), nn.SiLU(), nn.Linear(128, 64), nn.SiLU())

    def forward(self, x):
        x = torch.nan_to_num(x, nan=0.0)  # CLEAN: no host branch on NaNs
        return self.net(x)


class CalibratedHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 1)
        self.temperature = 1.0

    def forward(self, z):
        t = self.temperature  # HAZARD: python-scalar
        return self.fc(z).squeeze(-1) / t


drop, trunk, head = FeatureDropout().to(dev), Trunk(D).to(dev), CalibratedHead().to(dev)
s_x = torch.randn(B, D, device=dev)
s_h = torch.randn(B, D, device=dev)
s_z = torch.randn(B, 64, device=dev, requires_grad=True)
with torch.cuda.amp.autocast():  # HAZARD: autocast-cache
    g_drop, g_trunk, g_head = torch.cuda.make_graphed_callables(
        (drop, trunk, head), ((s_x,), (s_h,), (s_z,)))

opt = torch.optim.AdamW(list(trunk.parameters()) + list(head.parameters()), lr=3e-4)
Xt, yt = torch.from_numpy(X), torch.from_numpy(y)


def fit_epoch():
    perm = torch.randperm(len(Xt))
    for i in range(0, len(Xt) - B + 1, B):
        idx = perm[i:i + B]
        xb, yb = Xt[idx].to(dev), yt[idx].to(dev)
        logits = g_head(g_trunk(g_drop(xb)))  # CLEAN: positional tensors, as captured
        loss = F.binary_cross_entropy_with_logits(logits, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()


def refit_temperature(xv, yv):
    with torch.no_grad():
        z = trunk(xv)
        best = min(np.linspace(0.5, 3.0, 26),
                   key=lambda t: F.binary_cross_entropy_with_logits(head.fc(z).squeeze(-1) / t, yv).item())
    head.temperature = float(best)


def score(xb):
    return torch.sigmoid(g_head(z=g_trunk(g_drop(xb))))  # HAZARD: api-misuse


for week in range(8):
    for _ in range(5):
        fit_epoch()
    refit_temperature(Xt[-5000:].to(dev), yt[-5000:].to(dev))
risk = score(Xt[:B].to(dev)).detach().cpu().numpy()
