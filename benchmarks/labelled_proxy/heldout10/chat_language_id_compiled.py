"""Language identification for a chat app's auto-translate toggle.

fastText-style model: hashed character n-gram embeddings averaged over the
message, then a linear layer over 176 languages. The CPU side hashes each
message into 64 n-gram slots and sends 512-message batches per tenant. The GPU
functions are compiled through a shared `rcompile` partial (reduce-overhead).
"""
import functools

import torch
import torch.nn as nn

N_LANG, BUCKETS, SLOTS, BATCH = 176, 2 ** 20, 64, 512
rcompile = functools.partial(torch.compile, mode="reduce-overhead")
TENANT_MIN_CONF = {"gaming": 0.55, "support": 0.80, "dating": 0.70, "marketplace": 0.65}


class FastTextLID(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.emb = nn.Embedding(BUCKETS, d, padding_idx=0)
        self.out = nn.Linear(d, N_LANG)

    def forward(self, ngrams):
        m = (ngrams != 0).float().unsqueeze(-1)
        return self.out((self.emb(ngrams) * m).sum(1) / m.sum(1).clamp_min(1.0))


@rcompile
def detect(model, ngrams, min_conf):
    probs = torch.softmax(model(ngrams), -1)
    top = probs.max(-1)
    keep = top.values > min_conf  # HAZARD: python-scalar
    confident = top.indices[keep]  # HAZARD: dynamic-shape
    print("lid batch", ngrams.shape[0], "messages")  # HAZARD: host-code
    return top.indices, confident


@rcompile
def detect_dense(model, ngrams, min_conf_t):
    probs = torch.softmax(model(ngrams), -1)
    top = probs.max(-1)
    return torch.where(top.values > min_conf_t, top.indices, -1)  # CLEAN: torch.where with a device threshold, static shape


def route(model, tenant_batches):
    """Returns, per batch, the detected language of every message."""
    langs = []
    with torch.no_grad():
        for tenant, ngrams in tenant_batches:
            lang, _ = detect(model, ngrams, TENANT_MIN_CONF[tenant])
            langs.append(lang)  # HAZARD: static-address
    return langs


def route_dense(model, tenant_batches):
    conf = {k: torch.tensor(v, device="cuda") for k, v in TENANT_MIN_CONF.items()}  # CLEAN: thresholds built once as device tensors
    langs = []
    with torch.no_grad():
        for tenant, ngrams in tenant_batches:
            langs.append(detect_dense(model, ngrams, conf[tenant]).clone())  # CLEAN: output cloned before the next call
    return langs


def translate_toggle(langs, user_lang):
    return [(l != user_lang) & (l >= 0) for l in langs]


if __name__ == "__main__":
    model = FastTextLID().cuda().eval()
    model.load_state_dict(torch.load("lid176_hashed.pt"))
    batches = torch.load("chat_batches_by_tenant.pt")
    out = route_dense(model, batches)
    print(sum(int(t.sum()) for t in translate_toggle(out, user_lang=40)))
