"""Continuous authentication from keystroke dynamics (TypeNet-style).

Hold / flight-time sequences of the last 50 keystrokes are embedded by an LSTM
and compared with the user's enrolled templates. Scoring functions live in a
registry and are compiled with backend="cudagraphs"; the collector sends fixed
256-session batches.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SEQ, FEAT, N_TEMPL, EMB = 50, 5, 10, 128
SCORERS = {}


def register(name, **compile_kw):
    def deco(fn):
        SCORERS[name] = torch.compile(fn, backend="cudagraphs", **compile_kw)
        return fn
    return deco


class TypeNet(nn.Module):
    def __init__(self, n_users=4096, d=128):
        super().__init__()
        self.lstm = nn.LSTM(FEAT, d, num_layers=2, batch_first=True)
        self.proj = nn.Linear(d, EMB)
        self.register_buffer("templates", torch.zeros(n_users, N_TEMPL, EMB))

    def embed(self, x):
        h, _ = self.lstm(x)
        return F.normalize(self.proj(h[:, -1]), dim=-1)


@register("augment_enroll")
def augment_enroll(model, x):
    jitter = np.random.normal(1.0, 0.05, size=FEAT).astype(np.float32)  # HAZARD: host-code
    return model.embed(x * torch.from_numpy(jitter).to(x.device))


@register("verify")
def verify(model, x, user_idx, thr):
    emb = model.embed(x)
    dist = 1 - torch.einsum("bd,bkd->bk", emb, model.templates[user_idx])
    d_min = dist.min(1).values
    if d_min.min() > thr:  # HAZARD: dynamic-control-flow
        return torch.ones_like(d_min, dtype=torch.bool), d_min
    return d_min > thr, d_min


@register("risk_score")
def risk_score(model, x, user_idx):
    sim = torch.einsum("bd,bkd->bk", model.embed(x), model.templates[user_idx]).max(1).values
    worst = sim.min().item()  # HAZARD: host-sync
    return sim, worst


class Enrollment:
    def __init__(self, model):
        self.model = model

    @torch.no_grad()
    def enroll(self, user, samples):  # samples: (N_TEMPL, SEQ, FEAT) on the GPU
        emb = SCORERS["augment_enroll"](self.model, samples)
        idx = torch.tensor([user], device=emb.device)
        self.model.templates.index_copy_(0, idx, emb.clone().unsqueeze(0))  # CLEAN: in-place update of the buffer, address unchanged

    def nightly_rebuild(self, store):
        # re-embed every user's templates with the new checkpoint's projection
        self.model.templates = store.load_all_templates().to("cuda")  # HAZARD: static-address


def serve(model, batches, thr=0.35):
    thr_t = torch.tensor(thr, device="cuda")  # CLEAN: threshold built once as a device tensor, outside compiled code
    locked = []
    with torch.no_grad():
        for x, users in batches:
            lock, d = SCORERS["verify"](model, x, users, thr_t)
            locked.append(lock.clone())  # CLEAN: cloned before the next replay
            sim, worst = SCORERS["risk_score"](model, x, users)
            if worst < 0.2:
                print("low-similarity session in batch")
    return torch.cat(locked)


if __name__ == "__main__":
    model = TypeNet().cuda().eval()
    model.load_state_dict(torch.load("typenet_mobile.pt"))
    stream = torch.load("keystroke_batches.pt")
    print(serve(model, stream).float().mean())
