"""Fraudulent job-posting detector (EMSCAD-style): TF-IDF + logistic regression in torch.

A trust-and-safety data scientist replaced sklearn's LogisticRegression by a torch version to train
on GPU with class weighting; the vectoriser stays scikit-learn.  The training step
is compiled with reduce-overhead, the SGD step with the cudagraphs backend.
"""
import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.model_selection import train_test_split

dev = torch.device("cuda")
posts = pd.read_csv("job_postings.csv").dropna(subset=["description"])
tr, te = train_test_split(posts, test_size=0.2, stratify=posts.fraudulent, random_state=42)
vec = TfidfVectorizer(max_features=50_000, ngram_range=(1, 2), min_df=3, sublinear_tf=True)
Xtr = vec.fit_transform(tr.description).astype(np.float32)
Xte = vec.transform(te.description).astype(np.float32)
ytr = tr.fraudulent.to_numpy(np.float32)
B = 2048


class LogReg(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = torch.nn.Linear(d, 1)
        self.pos_weight = 1.0

    def loss(self, x, y):
        pw = self.pos_weight  # HAZARD: python-scalar
        logits = self.lin(x).squeeze(-1)
        loss = F.binary_cross_entropy_with_logits(logits, y, pos_weight=torch.full_like(y[:1], pw))
        acc = ((logits > 0).float() == y).float().mean().item()  # HAZARD: host-sync
        print("batch loss", loss, "acc", acc)  # HAZARD: host-code
        return loss


model = LogReg(Xtr.shape[1]).to(dev)
model.pos_weight = float((ytr == 0).sum() / max((ytr == 1).sum(), 1))
opt = torch.optim.SGD(model.parameters(), lr=torch.tensor(0.5, device=dev), weight_decay=1e-5)
train_loss = torch.compile(model.loss, mode="reduce-overhead")
sgd_step = torch.compile(opt.step, backend="cudagraphs")
eval_logits = torch.compile(lambda x: model.lin(x).squeeze(-1))  # default compile for scoring


def dense_batches(X, y, bs):
    idx = np.random.permutation(X.shape[0])
    for i in range(0, X.shape[0] - bs + 1, bs):
        j = idx[i:i + bs]
        xb = torch.from_numpy(X[j].toarray()).pin_memory()
        yield xb.to(dev, non_blocking=True), torch.from_numpy(y[j]).to(dev)  # CLEAN: eager copies, outside any region


for epoch in range(10):
    for xb, yb in dense_batches(Xtr, ytr, B):
        loss = train_loss(xb, yb)
        loss.backward()
        sgd_step()
        opt.zero_grad(set_to_none=True)
    opt.param_groups[0]["lr"].mul_(0.8)  # CLEAN: tensor LR changed in place
    if epoch == 3:
        model.pos_weight = model.pos_weight * 0.5          # soften the class weight after review
    if epoch == 5:
        opt.param_groups[0]["weight_decay"] = 1e-4  # HAZARD: optimizer

with torch.no_grad():
    scores = []
    for i in range(0, Xte.shape[0], B):
        xb = torch.from_numpy(Xte[i:i + B].toarray()).to(dev)
        scores.append(torch.sigmoid(eval_logits(xb)).cpu())  # CLEAN: default compile, ragged last chunk is fine
te = te.assign(p_fraud=torch.cat(scores).numpy())
te.to_csv("posting_scores.csv", index=False)
