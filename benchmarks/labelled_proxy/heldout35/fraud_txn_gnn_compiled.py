"""Card-transaction fraud scoring with a GraphSAGE-style account/merchant graph model.

The scorer's forward is replaced by torch.compile(..., mode="max-autotune"); the account
embedder used by the online path is a separate reduce-overhead build.

    python fraud_txn_gnn_compiled.py train --edges txns.parquet.npz --epochs 8
    python fraud_txn_gnn_compiled.py serve --ckpt fraud.pt --ticks 2000
"""
import argparse
import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("fraud")


@dataclass
class FraudConfig:
    n_accounts: int = 500_000
    n_merchants: int = 80_000
    n_mcc: int = 600
    dim: int = 96
    fanout: int = 16
    batch: int = 1024
    lr: float = 2e-3
    epochs: int = 8
    pos_weight: float = 30.0
    alert_threshold: float = 0.9
    buckets: tuple = (64, 256, 1024)


def parse_args():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--edges", default="txns.npz")
    t.add_argument("--epochs", type=int, default=8)
    t.add_argument("--ckpt", default="fraud.pt")
    s = sub.add_parser("serve")
    s.add_argument("--ckpt", default="fraud.pt")
    s.add_argument("--ticks", type=int, default=2000)
    s.add_argument("--padded", action="store_true")
    return p.parse_args()


# ----------------------------------------------------------------------------- graph + sampling (host)

class TxnGraph:
    def __init__(self, path, cfg):
        z = np.load(path)
        self.src = z["account"].astype(np.int64)
        self.dst = z["merchant"].astype(np.int64)
        self.amount = z["amount"].astype(np.float32)
        self.mcc = z["mcc"].astype(np.int64)
        self.label = z["is_fraud"].astype(np.float32)
        self.ts = z["ts"].astype(np.int64)
        order = np.argsort(self.src, kind="stable")
        self.csr_ptr = np.searchsorted(self.src[order], np.arange(cfg.n_accounts + 1))
        self.csr_dst = self.dst[order]
        self.cfg = cfg

    def sample_neighbors(self, accounts, fanout, rng):
        out = np.full((len(accounts), fanout), -1, dtype=np.int64)
        for i, a in enumerate(accounts):
            lo, hi = self.csr_ptr[a], self.csr_ptr[a + 1]
            if hi > lo:
                pick = rng.integers(lo, hi, size=fanout)  # CLEAN: host RNG in the neighbour sampler
                out[i] = self.csr_dst[pick]
        return out

    def batches(self, idx, batch, rng, dev):
        for s in range(0, len(idx) - batch + 1, batch):
            j = idx[s:s + batch]
            nbr = self.sample_neighbors(self.src[j], self.cfg.fanout, rng)
            yield {
                "account": torch.from_numpy(self.src[j]).to(dev),
                "merchant": torch.from_numpy(self.dst[j]).to(dev),
                "mcc": torch.from_numpy(self.mcc[j]).to(dev),
                "amount": torch.from_numpy(self.amount[j]).to(dev),
                "nbr": torch.from_numpy(nbr).to(dev),
                "y": torch.from_numpy(self.label[j]).to(dev),
            }


# ----------------------------------------------------------------------------- model

class AccountEmbedder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.acc = nn.Embedding(cfg.n_accounts, cfg.dim)
        self.mer = nn.Embedding(cfg.n_merchants + 1, cfg.dim, padding_idx=cfg.n_merchants)
        self.agg = nn.Linear(2 * cfg.dim, cfg.dim)
        self.pad = cfg.n_merchants

    def forward(self, account, nbr):
        nbr_ok = nbr.clamp_min(0)
        nbr_e = self.mer(torch.where(nbr >= 0, nbr_ok, torch.full_like(nbr, self.pad)))  # CLEAN: where keeps the shape
        deg = (nbr >= 0).sum(-1, keepdim=True).clamp_min(1)
        mean = nbr_e.sum(1) / deg
        return F.gelu(self.agg(torch.cat([self.acc(account), mean], -1)))


class FraudScorer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed = AccountEmbedder(cfg)
        self.mer = nn.Embedding(cfg.n_merchants, cfg.dim)
        self.mcc = nn.Embedding(cfg.n_mcc, 16)
        self.amount_proj = nn.Linear(1, 16)
        self.mlp = nn.Sequential(nn.Linear(2 * cfg.dim + 32, 256), nn.GELU(), nn.Dropout(0.1), nn.Linear(256, 1))
        self.threshold_shift = 0.0

    def forward(self, account, merchant, mcc, amount, nbr):
        if (amount > 1e6).any():  # HAZARD: dynamic-control-flow
            amount = amount.clamp(max=1e6)
        amount.log1p_()  # HAZARD: static-address
        t_start = time.time()  # HAZARD: host-code
        h_acc = self.embed(account, nbr)
        deg = (nbr >= 0).sum(-1)
        max_deg = int(deg.max())  # HAZARD: host-sync
        seen = nbr[nbr >= 0]  # HAZARD: dynamic-shape
        novelty = (nbr[:, :max_deg] == merchant[:, None]).float().mean(-1)
        distinct = torch.unique(mcc)  # HAZARD: dynamic-shape
        log.debug("batch of %d, mean log-amount %s, %d MCCs", account.shape[0], amount.mean(), distinct.numel())  # HAZARD: host-code
        feats = torch.cat([h_acc, self.mer(merchant), self.mcc(mcc), self.amount_proj(amount[:, None])], -1)
        logit = self.mlp(feats).squeeze(-1) + novelty - 0.01 * seen.numel() / max(account.shape[0], 1)
        return logit - self.threshold_shift  # HAZARD: python-scalar


# ----------------------------------------------------------------------------- training

def roc_auc(scores, labels):
    order = np.argsort(-scores)
    y = labels[order]
    tp = np.cumsum(y)
    fp = np.cumsum(1 - y)
    tpr = tp / max(tp[-1], 1)
    fpr = fp / max(fp[-1], 1)
    return float(np.trapz(tpr, fpr))


def train(args):
    cfg = FraudConfig(epochs=args.epochs)
    dev = torch.device("cuda")
    graph = TxnGraph(args.edges, cfg)
    rng = np.random.default_rng(0)
    n = len(graph.label)
    cut = int(0.85 * n)
    order = np.argsort(graph.ts)
    tr_idx, va_idx = order[:cut], order[cut:]
    model = FraudScorer(cfg).to(dev)
    model.forward = torch.compile(model.forward, mode="max-autotune")
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=1e-5)
    pos_w = torch.tensor(cfg.pos_weight, device=dev)
    total = cfg.epochs * (len(tr_idx) // cfg.batch)
    step = 0
    for epoch in range(cfg.epochs):
        model.train()
        rng.shuffle(tr_idx)
        t0 = time.time()  # CLEAN: epoch wall clock outside the compiled forward
        run = []
        for b in graph.batches(tr_idx, cfg.batch, rng, dev):
            logit = model(b["account"], b["merchant"], b["mcc"], b["amount"], b["nbr"])
            loss = F.binary_cross_entropy_with_logits(logit, b["y"], pos_weight=pos_w)
            run.append(loss.detach().clone())  # CLEAN: cloned before backward
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            for g in opt.param_groups:
                g["lr"] = cfg.lr * 0.5 * (1 + math.cos(math.pi * step / total))  # CLEAN: eager optimizer, its step is not compiled
            step += 1
            if step % 500 == 0:
                log.info("step %d loss %.4f", step, torch.stack(run[-500:]).mean().item())  # CLEAN: logging in the driver loop
        auc, prec_at = validate(model, graph, va_idx, cfg, dev)
        print(f"epoch {epoch} val AUC {auc:.4f} precision@alert {prec_at:.3f} ({time.time() - t0:.0f}s)")
    torch.save({"model": model.state_dict(), "cfg": cfg.__dict__}, args.ckpt)


@torch.no_grad()
def validate(model, graph, idx, cfg, dev):
    model.eval()
    scores, labels = [], []
    rng = np.random.default_rng(1)
    for b in graph.batches(idx, cfg.batch, rng, dev):
        logit = model(b["account"], b["merchant"], b["mcc"], b["amount"], b["nbr"])
        scores.append(torch.sigmoid(logit).cpu().numpy())  # CLEAN: copied to host right after the call
        labels.append(b["y"].cpu().numpy())
    s = np.concatenate(scores)
    y = np.concatenate(labels)
    flagged = np.nonzero(s > cfg.alert_threshold)[0]  # CLEAN: NumPy nonzero on host scores
    prec = float(y[flagged].mean()) if len(flagged) else 0.0
    return roc_auc(s, y), prec


# ----------------------------------------------------------------------------- online scoring

class OnlineScorer:
    def __init__(self, ckpt, dev, padded):
        blob = torch.load(ckpt, map_location="cpu")
        self.cfg = FraudConfig(**blob["cfg"])
        model = FraudScorer(self.cfg).to(dev).eval()
        model.load_state_dict(blob["model"])
        self.model = model
        self.score = torch.compile(model.forward, mode="max-autotune")
        self.embed = torch.compile(model.embed, mode="reduce-overhead")
        self.explain = torch.compile(model.forward)
        self.padded = padded
        self.dev = dev

    def _pad(self, t, b, fill):
        out = torch.full((b,) + tuple(t.shape[1:]), fill, dtype=t.dtype, device=t.device)
        out[: t.shape[0]] = t
        return out

    @torch.no_grad()
    def tick(self, req):
        n = req["account"].shape[0]
        if self.padded:
            b = next(k for k in self.cfg.buckets if k >= n)
            args = [self._pad(req[k], b, 0) for k in ("account", "merchant", "mcc")]
            args += [self._pad(req["amount"], b, 0.0), self._pad(req["nbr"], b, -1)]
            logit = self.score(*args)[:n]  # CLEAN: padded to a fixed bucket, one graph per bucket
            emb = self.embed(args[0], args[4])[:n].clone()  # CLEAN: embedding cloned before the next compiled call
        else:
            emb = self.embed(req["account"], req["nbr"])
            logit = self.score(req["account"], req["merchant"], req["mcc"], req["amount"].clone(), req["nbr"])  # HAZARD: dynamic-shape
        prob = torch.sigmoid(logit)
        drift = emb.norm(dim=-1).mean()  # HAZARD: static-address
        return prob.clone(), drift.clone()


def fake_requests(cfg, ticks, dev):
    rng = np.random.default_rng(5)
    for _ in range(ticks):
        n = int(rng.integers(1, cfg.buckets[-1]))  # CLEAN: host RNG choosing a request count
        yield {
            "account": torch.from_numpy(rng.integers(0, cfg.n_accounts, n)).to(dev),
            "merchant": torch.from_numpy(rng.integers(0, cfg.n_merchants, n)).to(dev),
            "mcc": torch.from_numpy(rng.integers(0, cfg.n_mcc, n)).to(dev),
            "amount": torch.from_numpy(rng.gamma(2.0, 40.0, n).astype(np.float32)).to(dev),
            "nbr": torch.from_numpy(rng.integers(-1, cfg.n_merchants, (n, cfg.fanout))).to(dev),
        }


def serve(args):
    dev = torch.device("cuda")
    scorer = OnlineScorer(args.ckpt, dev, args.padded)
    alerts, lat = 0, []
    for i, req in enumerate(fake_requests(scorer.cfg, args.ticks, dev)):
        if i % 500 == 0:
            scorer.model.threshold_shift = 0.05 * (i // 500)
        t0 = time.perf_counter()
        prob, drift = scorer.tick(req)
        hits = (prob > scorer.cfg.alert_threshold).nonzero().flatten().tolist()  # CLEAN: nonzero/tolist on a cloned result, outside the compiled functions
        alerts += len(hits)
        lat.append(time.perf_counter() - t0)
        if i % 200 == 0:
            print(f"tick {i}: {len(hits)} alerts, embedding drift {drift.item():.3f}, "
                  f"p99 {1e3 * np.percentile(lat, 99):.2f} ms")
            if hits:
                why = scorer.explain(req["account"][:1], req["merchant"][:1], req["mcc"][:1],
                                     req["amount"][:1].clone(), req["nbr"][:1])  # CLEAN: default torch.compile, no CUDA graphs
                log.info("explain first alert: logit %.3f", why.item())
    print(f"{alerts} alerts over {args.ticks} ticks")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    a = parse_args()
    train(a) if a.cmd == "train" else serve(a)
