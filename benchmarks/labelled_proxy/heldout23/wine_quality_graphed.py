"""Wine quality regression (UCI red/white), MLP with Gaussian input noise.

A data scientist's script: pandas + scikit-learn split/scaler, then one torch
module graphed with make_graphed_callables.  The 'prior' buffer holds the
per-style mean quality and is refreshed when new vintages arrive.
"""
import numpy as np
import pandas as pd
import torch
import torch.nn as nn
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

dev = torch.device("cuda")
red = pd.read_csv("winequality-red.csv", sep=";").assign(style=0)
white = pd.read_csv("winequality-white.csv", sep=";").assign(style=1)
wine = pd.concat([red, white], ignore_index=True)
FEATS = [c for c in wine.columns if c not in ("quality", "style")]
X_tr, X_te, y_tr, y_te = train_test_split(wine[FEATS + ["style"]], wine.quality, test_size=0.2, random_state=0)
scaler = StandardScaler().fit(X_tr[FEATS])


def to_tensor(df):
    x = np.concatenate([scaler.transform(df[FEATS]), df[["style"]].to_numpy()], 1)
    return torch.tensor(x, dtype=torch.float32)


class WineNet(nn.Module):
    def __init__(self, d, prior_np):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))
        self.register_buffer("prior", torch.from_numpy(prior_np))
        self.style_offset_np = np.array([0.0, -0.08], dtype=np.float32)   # sommelier panel bias
        self.noise_gen = torch.Generator(device="cuda")
        self.noise_gen.manual_seed(3)
        self.good = torch.zeros(1, device="cuda")

    def forward(self, x):
        x = x + 0.05 * torch.randn(x.shape, device=x.device, generator=self.noise_gen)  # HAZARD: rng
        style = x[:, -1].round().long().clamp(0, 1)  # CLEAN: clamp keeps the shape
        base = self.prior[style]  # CLEAN: gather from the device buffer
        offset = torch.from_numpy(self.style_offset_np).cuda()  # HAZARD: pinned-memory
        base = base + offset[style]
        y_hat = base + self.net(x).squeeze(-1)
        self.good.copy_(y_hat[y_hat > 6.5].mean())  # HAZARD: dynamic-shape
        return y_hat


prior_np = wine.groupby("style").quality.mean().to_numpy(np.float32)
model = WineNet(len(FEATS) + 1, prior_np).to(dev)
B = 64
sample = torch.randn(B, len(FEATS) + 1, device=dev)
g_model = torch.cuda.make_graphed_callables(model, (sample,))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)

Xt, yt = to_tensor(X_tr), torch.tensor(y_tr.to_numpy(), dtype=torch.float32)


def train(epochs=200):
    for ep in range(epochs):
        perm = torch.randperm(len(Xt))
        for i in range(0, len(Xt) - B + 1, B):
            idx = perm[i:i + B]
            pred = g_model(Xt[idx].to(dev))
            loss = nn.functional.mse_loss(pred, yt[idx].to(dev))
            opt.zero_grad()
            loss.backward()
            opt.step()  # CLEAN: eager optimizer step outside the graphs


def new_vintage(path):
    vint = pd.read_csv(path)
    new_prior = vint.groupby("style").quality.mean().to_numpy(np.float32)
    model.prior = torch.from_numpy(new_prior).to(dev)  # HAZARD: static-address


def new_vintage_inplace(path):
    vint = pd.read_csv(path)
    model.prior.copy_(torch.from_numpy(vint.groupby("style").quality.mean().to_numpy(np.float32)))  # CLEAN: copy_ keeps the captured address


train()
new_vintage("vintage_2024.csv")
train(20)
print("good-wine mean", model.good.item())
