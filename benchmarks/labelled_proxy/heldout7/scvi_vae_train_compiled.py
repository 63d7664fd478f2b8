"""scVI-style variational autoencoder for single-cell RNA-seq counts (ZINB likelihood).

The forward/loss step and the optimizer step are compiled with mode="reduce-overhead";
the KL term is warmed up over the first 400 epochs and the learning rate decays per epoch.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class SCVI(nn.Module):
    def __init__(self, n_genes, n_batches, n_latent=10, hidden=128):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(n_genes + n_batches, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Dropout(0.1))
        self.mu, self.logv = nn.Linear(hidden, n_latent), nn.Linear(hidden, n_latent)
        self.dec = nn.Sequential(nn.Linear(n_latent + n_batches, hidden), nn.BatchNorm1d(hidden), nn.ReLU())
        self.scale, self.dropout = nn.Linear(hidden, n_genes), nn.Linear(hidden, n_genes)
        self.log_theta = nn.Parameter(torch.zeros(n_genes))

    def encode(self, x_log, b):
        h = self.enc(torch.cat([x_log, b], -1))
        return self.mu(h), self.logv(h).clamp(-10, 10)

    def decode(self, z, b, library):
        h = self.dec(torch.cat([z, b], -1))
        return F.softmax(self.scale(h), -1) * library, self.log_theta.exp(), self.dropout(h)


def zinb_nll(x, mu, theta, pi_logits, eps=1e-8):
    log_theta_mu = torch.log(theta + mu + eps)
    nb_case = (theta * (torch.log(theta + eps) - log_theta_mu) + x * (torch.log(mu + eps) - log_theta_mu)
               + torch.lgamma(x + theta) - torch.lgamma(theta) - torch.lgamma(x + 1))
    zero_case = F.softplus(-pi_logits + theta * (torch.log(theta + eps) - log_theta_mu)) - F.softplus(-pi_logits)
    nonzero_case = -pi_logits - F.softplus(-pi_logits) + nb_case
    return -torch.where(x < eps, zero_case, nonzero_case)  # CLEAN: zero/non-zero cases selected with where


def build_steps(model, opt, gene_dropout=0.1):
    @torch.compile(mode="reduce-overhead")
    def loss_step(x, b, kl_weight):
        drop = np.random.rand(x.shape[1]) < gene_dropout  # HAZARD: host-code
        x_in = torch.log1p(x) * torch.as_tensor(~drop, dtype=x.dtype, device=x.device)
        qm, qlv = model.encode(x_in, b)
        z = qm + torch.randn_like(qm) * (0.5 * qlv).exp()  # CLEAN: default-generator CUDA RNG in the compiled step
        mu, theta, pi = model.decode(z, b, x.sum(1, keepdim=True))
        rec = zinb_nll(x, mu, theta, pi).sum(1).mean()
        kl = (-0.5 * (1 + qlv - qm.pow(2) - qlv.exp())).sum(1).mean()
        loss = rec + kl_weight * kl  # HAZARD: python-scalar
        if torch.isnan(loss):  # HAZARD: dynamic-control-flow
            raise FloatingPointError("NaN in ELBO; lower the learning rate")
        return loss

    @torch.compile(mode="reduce-overhead")
    def opt_step():
        opt.step()

    return loss_step, opt_step


def train(adata_loader, n_genes, n_batches, epochs=400, base_lr=1e-3, device="cuda"):
    model = SCVI(n_genes, n_batches).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=base_lr, eps=0.01)
    loss_step, opt_step = build_steps(model, opt)
    history = []
    for epoch in range(epochs):
        for group in opt.param_groups:
            group["lr"] = base_lr * (0.995 ** epoch)  # HAZARD: optimizer
        kl_weight = min(1.0, epoch / 400)
        running = torch.zeros((), device=device)
        for counts, batch_onehot in adata_loader:
            counts = counts.to(device, non_blocking=True)
            batch_onehot = batch_onehot.to(device, non_blocking=True)
            loss = loss_step(counts, batch_onehot, kl_weight)
            running += loss.detach()  # CLEAN: read before any other compiled call, backward still pending
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt_step()
        history.append(running.item() / len(adata_loader))
    return model, history


@torch.no_grad()
def latent(model, loader, device="cuda"):
    model.eval()
    enc = torch.compile(model.encode, mode="max-autotune-no-cudagraphs")
    zs = []
    for counts, b in loader:
        qm, _ = enc(torch.log1p(counts.to(device)), b.to(device))
        zs.append(qm)  # CLEAN: compiled without CUDA graphs, outputs are not overwritten
    return torch.cat(zs).cpu().numpy()
