"""PatchTST-style multivariate forecaster with RevIN, compiled with mode="max-autotune"."""
import logging
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("forecast")


class RevIN(nn.Module):
    def __init__(self, n_vars, eps=1e-5):
        super().__init__()
        self.w = nn.Parameter(torch.ones(n_vars))
        self.b = nn.Parameter(torch.zeros(n_vars))
        self.eps = eps

    def norm(self, x):
        self.mu = x.mean(1, keepdim=True).detach()
        self.sd = (x.var(1, keepdim=True, unbiased=False) + self.eps).sqrt().detach()  # CLEAN: eps fixed at construction
        return (x - self.mu) / self.sd * self.w + self.b

    def denorm(self, y):
        return (y - self.b) / (self.w + self.eps) * self.sd + self.mu


class PatchTST(nn.Module):
    def __init__(self, n_vars=7, context=336, patch_len=16, stride=8, d_model=128, horizon=96):
        super().__init__()
        self.revin = RevIN(n_vars)
        self.patch_len, self.stride = patch_len, stride
        n_patch = (context - patch_len) // stride + 1
        self.proj = nn.Linear(patch_len, d_model)
        self.pos = nn.Parameter(torch.randn(n_patch, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model, 8, 256, dropout=0.2, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 3)
        self.head = nn.Linear(n_patch * d_model, 720)
        self.horizon = horizon

    def forward(self, x):  # (B, L, V)
        if torch.isnan(x).any():  # HAZARD: dynamic-control-flow
            x = torch.nan_to_num(x)
        x = self.revin.norm(x)
        B, L, V = x.shape
        p = x.permute(0, 2, 1).unfold(-1, self.patch_len, self.stride)  # CLEAN: patch length fixed at construction
        log.info("forecast batch: %d series, %d patches", B * V, p.shape[2])  # HAZARD: host-code
        z = self.proj(p).reshape(B * V, -1, self.pos.shape[-1]) + self.pos
        z = self.encoder(z).reshape(B, V, -1)
        y = self.head(z)[..., : self.horizon]  # HAZARD: python-scalar
        return self.revin.denorm(y.permute(0, 2, 1))


def train(model, loader, epochs=20, base_lr=1e-4):
    model.cuda().train()
    model.forward = torch.compile(model.forward, mode="max-autotune")
    opt = torch.optim.Adam(model.parameters(), lr=base_lr)

    @torch.compile(mode="max-autotune")
    def opt_step():
        opt.step()

    total, step = epochs * len(loader), 0
    for epoch in range(epochs):
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            loss = F.mse_loss(model(x), y[:, : model.horizon])
            loss.backward()
            opt_step()
            opt.zero_grad(set_to_none=True)
            for g in opt.param_groups:
                g["lr"] = base_lr * 0.5 * (1 + math.cos(math.pi * step / total))  # HAZARD: optimizer
            if step % 100 == 0:
                log.info("step %d mse %.5f", step, loss.item())  # CLEAN: logging and .item() in the eager loop
            step += 1
    return model


@torch.no_grad()
def serve(model, series, horizons):
    model.eval()
    out = {}
    for name, h in horizons.items():  # e.g. {"day": 24, "week": 168, "month": 720}
        model.horizon = h
        out[name] = model(series).clone()  # CLEAN: output cloned before the next call
    return out


if __name__ == "__main__":
    from torch.utils.data import DataLoader, TensorDataset
    xs, ys = torch.randn(4096, 336, 7), torch.randn(4096, 720, 7)
    m = train(PatchTST(), DataLoader(TensorDataset(xs, ys), batch_size=128, drop_last=True), epochs=2)
    res = serve(m, xs[:32].cuda(), {"day": 24, "week": 168, "month": 720})
    print({k: v.shape for k, v in res.items()})
