"""Employee attrition risk (IBM HR analytics style), people-analytics team job.

pandas + scikit-learn preprocessing; the torch model is compiled with
mode="max-autotune" and handed to a small Trainer, whose optimizer step is
compiled with the triton.cudagraphs option.  Monthly scoring feeds a dashboard.
"""
import numpy as np
import pandas as pd
import torch
import torch.nn as nn
from sklearn.compose import make_column_transformer
from sklearn.preprocessing import OneHotEncoder, RobustScaler

dev = torch.device("cuda")
hr = pd.read_csv("hr_attrition.csv")
num_cols = ["Age", "MonthlyIncome", "YearsAtCompany", "DistanceFromHome", "TotalWorkingYears", "JobSatisfaction"]
cat_cols = ["Department", "JobRole", "OverTime", "MaritalStatus"]
prep = make_column_transformer((RobustScaler(), num_cols), (OneHotEncoder(sparse_output=False, handle_unknown="ignore"), cat_cols))
X = prep.fit_transform(hr).astype(np.float32)
y = (hr.Attrition == "Yes").to_numpy(np.float32)
BS = 128


class AttritionNet(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d, 64), nn.GELU(), nn.Linear(64, 32), nn.GELU(), nn.Linear(32, 1))

    def forward(self, x):
        noise = torch.from_numpy(np.random.normal(0, 0.01, size=x.shape).astype(np.float32)).to(x.device)  # HAZARD: host-code
        return self.body(x + noise * self.training).squeeze(-1)


class Trainer:
    def __init__(self, model, lr=3e-3):
        self.model = model
        self.opt = torch.optim.Adam(model.parameters(), lr=lr)
        self._step = torch.compile(self.opt.step, options={"triton.cudagraphs": True})

    def epoch(self, Xt, yt):
        self.model.train()
        perm = torch.randperm(len(Xt), device=dev)
        for i in range(0, len(Xt), BS):
            idx = perm[i:i + BS]
            loss = nn.functional.binary_cross_entropy_with_logits(self.model(Xt[idx]), yt[idx])  # HAZARD: dynamic-shape
            loss.backward()
            self._step()
            self.opt.zero_grad(set_to_none=True)
        return loss.detach()

    def plateau(self, val_loss, best):
        if val_loss > best:
            for g in self.opt.param_groups:
                g["lr"] *= 0.5  # HAZARD: optimizer


raw = AttritionNet(X.shape[1]).to(dev)
model = torch.compile(raw, mode="max-autotune")
preview = torch.compile(raw, mode="max-autotune-no-cudagraphs")
trainer = Trainer(model)
Xt, yt = torch.from_numpy(X).to(dev), torch.from_numpy(y).to(dev)
best = float("inf")
for ep in range(60):
    l = trainer.epoch(Xt, yt).item()  # CLEAN: eager loss tensor, read outside the compiled functions
    trainer.plateau(l, best)
    best = min(best, l)

model.eval()
monthly = pd.read_csv("hr_snapshot_monthly.csv")
scores, previews = [], []
with torch.no_grad():
    for month, snap in monthly.groupby("month"):
        xm = torch.from_numpy(prep.transform(snap).astype(np.float32)).to(dev)
        for i in range(0, len(xm) - BS + 1, BS):
            logits = model(xm[i:i + BS])
            scores.append(logits)  # HAZARD: static-address
        previews.append(preview(xm[:BS]))  # CLEAN: no-cudagraphs compile, the output is not graph-owned
dash = torch.sigmoid(torch.cat(scores)).cpu().numpy()
