"""Customer-store clustering with Lloyd's k-means on GPU (scikit-learn replacement).

A retail analytics notebook exported to a job: sklearn's KMeans was too slow on
40M card transactions, so the Lloyd iteration was written in torch and compiled
with options={"triton.cudagraphs": True}.
"""
import numpy as np
import pandas as pd
import torch

dev = torch.device("cuda")
K = 24
CG = {"triton.cudagraphs": True}

txn = pd.read_parquet("store_visits_agg.parquet")
feat_cols = ["basket_mean", "basket_std", "visits_pw", "share_fresh", "share_promo", "hour_mean", "weekend_share"]
X_np = ((txn[feat_cols] - txn[feat_cols].mean()) / txn[feat_cols].std()).to_numpy(np.float32)


@torch.compile(options=CG)
def lloyd_step(X, C):
    d2 = torch.cdist(X, C) ** 2
    labels = d2.argmin(1)
    sums = torch.zeros_like(C).index_add_(0, labels, X)  # CLEAN: index_add_ into a fresh tensor, fixed shape
    counts = torch.zeros(K, device=X.device, dtype=X.dtype).index_add_(0, labels, torch.ones_like(X[:, 0]))
    if (counts == 0).any():  # HAZARD: dynamic-control-flow
        counts = counts + 1.0
    C_new = sums / counts.clamp_min(1.0)[:, None]
    inertia = d2.gather(1, labels[:, None]).sum()
    return C_new, labels, inertia


@torch.compile(options=CG)
def cluster_spread(X, labels, C):
    spreads = []
    for k in range(K):
        members = X[labels == k]  # HAZARD: dynamic-shape
        spreads.append((members - C[k]).norm(dim=1).mean())
    return torch.stack(spreads)


@torch.compile(options=CG)
def converged(C_old, C_new, inertia, tol):
    shift = (C_new - C_old).norm(dim=1).max()
    rel = shift.item() / (inertia.item() + 1e-12)  # HAZARD: host-sync
    return rel < tol


def kmeans_pp_init(X, k, seed=0):
    g = torch.Generator(device=X.device).manual_seed(seed)
    idx = [int(torch.randint(len(X), (1,), generator=g, device=X.device))]
    for _ in range(1, k):
        d2 = torch.cdist(X, X[idx]).min(1).values ** 2
        idx.append(int(torch.multinomial(d2 / d2.sum(), 1, generator=g)))  # CLEAN: eager k-means++ init, outside the compiled functions
    return X[idx].clone()


def fit(X, n_iter=100, tol=1e-6):
    C = kmeans_pp_init(X, K)
    trajectory = []
    for it in range(n_iter):
        C_new, labels, inertia = lloyd_step(X, C)
        trajectory.append(C_new)  # HAZARD: static-address
        C_new, labels, inertia = C_new.clone(), labels.clone(), inertia.clone()  # CLEAN: cloned right after the call
        stop = converged(C, C_new, inertia, tol)
        C = C_new
        if stop:
            break
    return C, labels.clone(), trajectory


if __name__ == "__main__":
    X = torch.from_numpy(X_np).to(dev)
    C, labels, traj = fit(X)
    spread = cluster_spread(X, labels, C).cpu().numpy()
    txn["segment"] = labels.cpu().numpy()
    prof = txn.groupby("segment")[feat_cols].mean()
    prof["spread"] = spread
    prof.to_csv("store_segments.csv")
    np.save("centroid_path.npy", torch.stack(traj).cpu().numpy())
