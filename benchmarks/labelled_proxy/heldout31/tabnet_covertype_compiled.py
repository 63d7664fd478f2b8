"""TabNet on Forest CoverType (54 features, 7 classes): attentive transformer + sparsemax masks,
ghost batch norm, sparsity regulariser.

The assistant compiled the training loss with backend="cudagraphs" ("TabNet is many tiny ops")
and added a running feature-importance accumulator for the report.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def sparsemax(z):
    zs, _ = torch.sort(z, dim=-1, descending=True)  # CLEAN: sort-based sparsemax, fixed shapes
    k = torch.arange(1, z.shape[-1] + 1, device=z.device, dtype=z.dtype)
    cssv = zs.cumsum(-1) - 1
    k_z = (zs * k > cssv).sum(-1, keepdim=True)
    tau = cssv.gather(-1, k_z - 1) / k_z.to(z.dtype)
    return (z - tau).clamp_min(0)


class GhostBN(nn.Module):
    def __init__(self, d, vbs=256):
        super().__init__()
        self.bn, self.vbs = nn.BatchNorm1d(d, momentum=0.02), vbs

    def forward(self, x):
        n = max(1, (x.shape[0] + self.vbs - 1) // self.vbs)  # CLEAN: chunk count from the static shape
        return torch.cat([self.bn(c) for c in x.chunk(n)], 0)


class GLUBlock(nn.Module):
    def __init__(self, din, dout):
        super().__init__()
        self.fc, self.bn = nn.Linear(din, 2 * dout, bias=False), GhostBN(2 * dout)

    def forward(self, x):
        return F.glu(self.bn(self.fc(x)))


class TabNet(nn.Module):
    def __init__(self, n_feat=54, n_d=32, n_a=32, steps=4, gamma=1.5, n_classes=7):
        super().__init__()
        self.steps, self.gamma, self.n_d = steps, gamma, n_d
        self.bn0 = nn.BatchNorm1d(n_feat)
        self.shared = GLUBlock(n_feat, n_d + n_a)
        self.step_ft = nn.ModuleList(GLUBlock(n_d + n_a, n_d + n_a) for _ in range(steps + 1))
        self.att = nn.ModuleList(nn.Sequential(nn.Linear(n_a, n_feat, bias=False), GhostBN(n_feat)) for _ in range(steps))
        self.head = nn.Linear(n_d, n_classes)
        self.register_buffer("feature_importance", torch.zeros(n_feat))

    def forward(self, x):
        x = self.bn0(x)
        h = self.step_ft[0](self.shared(x))
        prior = torch.ones_like(x)
        out, m_loss = 0, 0
        self.last_masks = [None] * self.steps
        for s in range(self.steps):
            M = sparsemax(self.att[s](h[:, self.n_d:]) * prior)
            m_loss = m_loss + (-M * torch.log(M + 1e-10)).sum(1).mean() / self.steps
            prior = prior * (self.gamma - M)
            h = self.step_ft[s + 1](self.shared(x * M))
            out = out + F.relu(h[:, : self.n_d])
            self.feature_importance += M.detach().sum(0)  # CLEAN: registered buffer updated in place
            self.last_masks[s] = M.detach()
        return self.head(out), m_loss

model = TabNet().cuda()
opt = torch.optim.Adam(model.parameters(), lr=2e-2)
sched = torch.optim.lr_scheduler.StepLR(opt, 10, 0.95)  # CLEAN: eager optimizer and scheduler
cfg = {"lambda_sparse": 1e-3}


@torch.compile(backend="cudagraphs")
def train_loss(x, y):
    logits, m_loss = model(x)
    lam = cfg["lambda_sparse"]  # HAZARD: python-scalar
    loss = F.cross_entropy(logits, y) + lam * m_loss
    print("sparsity loss", m_loss)  # HAZARD: host-code
    return loss


@torch.compile(backend="cudagraphs")
def predict(x):
    return model(x)[0].argmax(1)


@torch.compile(backend="cudagraphs")
def explain(x, min_weight=0.05):  # used by the feature-attribution report
    model(x)
    masks = torch.stack(model.last_masks, 1)
    return masks[masks > min_weight]  # HAZARD: dynamic-shape


def fit(X, Y, Xte, Yte, epochs=100, bs=16384):
    for epoch in range(epochs):
        model.train()
        cfg["lambda_sparse"] = 1e-3 * min(1.0, (epoch + 1) / 20)  # anneal the sparsity weight
        perm = torch.randperm(X.shape[0], device="cuda")
        for i in range(0, X.shape[0] - bs + 1, bs):
            idx = perm[i:i + bs]
            loss = train_loss(X[idx], Y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        sched.step()
        model.eval()
        with torch.no_grad():
            acc = (predict(Xte) == Yte).float().mean()  # HAZARD: dynamic-shape
            val = (torch.cat([predict(Xte[j:j + bs]).clone() for j in range(0, Xte.shape[0] - bs + 1, bs)]) == Yte[: Xte.shape[0] // bs * bs]).float().mean()  # CLEAN: fixed-size chunks, each output cloned
        print(f"epoch {epoch} test acc {acc.item():.4f} chunked {val.item():.4f}")
