"""Neural position-based click model (examination x relevance) for unbiased learning to rank.

Training step and optimizer step are compiled with the dynamo "cudagraphs" backend.
"""
import logging
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger(__name__)
MAX_DOCS = 10


class NeuralClickModel(nn.Module):
    def __init__(self, n_feat=136, max_pos=MAX_DOCS, hidden=128):
        super().__init__()
        self.rel = nn.Sequential(nn.Linear(n_feat, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.exam = nn.Embedding(max_pos, 1)

    def forward(self, feats, positions):
        rel = torch.sigmoid(self.rel(feats).squeeze(-1))
        exam = torch.sigmoid(self.exam(positions).squeeze(-1))  # CLEAN: positions looked up through an embedding on the device
        return rel, exam


model = NeuralClickModel().cuda()
opt = torch.optim.Adam(model.rel.parameters(), lr=1e-3)
exam_lr = torch.tensor(5e-3, device="cuda")
opt_exam = torch.optim.Adam(model.exam.parameters(), lr=exam_lr, capturable=True)


@torch.compile(backend="cudagraphs")
def train_step(feats, positions, clicks, mask):
    rel, exam = model(feats, positions)
    p_click = (rel * exam).clamp(1e-6, 1 - 1e-6)
    if clicks.sum() == 0:  # HAZARD: dynamic-control-flow
        return (p_click * mask).sum() * 0.0
    log.debug("click-model batch of %d sessions", feats.shape[0])  # HAZARD: host-code
    return F.binary_cross_entropy(p_click, clicks, weight=mask, reduction="sum") / mask.sum()


@torch.compile(backend="cudagraphs")
def opt_step():
    opt.step()
    opt_exam.step()


def fit(sessions, epochs=5, base_lr=1e-3):
    for epoch in range(epochs):
        for feats, positions, clicks, mask in sessions:  # grouped by query, n_docs differs per group
            loss = train_step(feats, positions, clicks, mask)  # HAZARD: dynamic-shape
            opt.zero_grad(set_to_none=True)
            opt_exam.zero_grad(set_to_none=True)
            loss.backward()
            opt_step()
        for g in opt.param_groups:
            g["lr"] = base_lr * (0.5 ** epoch)  # HAZARD: optimizer
        exam_lr.fill_(5e-3 * (0.5 ** epoch))  # CLEAN: tensor LR updated in place
        log.info("epoch %d loss %.4f", epoch, loss.item())  # CLEAN: logging and .item() in the eager loop


def pad_session(feats, positions, clicks, mask):
    pad = MAX_DOCS - feats.shape[1]
    return (F.pad(feats, (0, 0, 0, pad)), F.pad(positions, (0, pad)),
            F.pad(clicks, (0, pad)), F.pad(mask, (0, pad)))


def fit_padded(sessions, epochs=5):
    for epoch in range(epochs):
        for batch in sessions:
            feats, positions, clicks, mask = pad_session(*batch)
            loss = train_step(feats, positions, clicks, mask)  # CLEAN: sessions padded to MAX_DOCS
            opt.zero_grad(set_to_none=True)
            opt_exam.zero_grad(set_to_none=True)
            loss.backward()
            opt_step()


@torch.no_grad()
def propensities():
    pos = torch.arange(MAX_DOCS, device="cuda")
    exam = torch.sigmoid(model.exam(pos).squeeze(-1))
    return (exam / exam[0]).cpu()


if __name__ == "__main__":
    def make(n_docs, B=256):
        return (torch.randn(B, n_docs, 136, device="cuda"),
                torch.arange(n_docs, device="cuda").expand(B, -1).contiguous(),
                (torch.rand(B, n_docs, device="cuda") < 0.1).float(),
                torch.ones(B, n_docs, device="cuda"))
    fit_padded([make(n) for n in (10, 7, 4)], epochs=1)
    print(propensities())
