# beta-VAE on dSprites (Higgins et al. 2017 / Burgess et al. 2018 capacity objective), from a 2018
# Solver-class code base. The loss and the decoder are compiled through a partial(torch.compile, ...).
import functools
import torch
import torch.nn as nn
import torch.nn.functional as F

cg_compile = functools.partial(torch.compile, mode="reduce-overhead")
torch.manual_seed(1)
torch.cuda.manual_seed(1)  # CLEAN: seeded once at start-up


class BetaVAE_H(nn.Module):
    def __init__(self, z_dim=10, nc=1):
        super().__init__()
        self.z_dim = z_dim
        self.encoder = nn.Sequential(nn.Conv2d(nc, 32, 4, 2, 1), nn.ReLU(True), nn.Conv2d(32, 32, 4, 2, 1), nn.ReLU(True),
                                     nn.Conv2d(32, 64, 4, 2, 1), nn.ReLU(True), nn.Conv2d(64, 64, 4, 2, 1), nn.ReLU(True),
                                     nn.Flatten(), nn.Linear(64 * 4 * 4, 256), nn.ReLU(True), nn.Linear(256, 2 * z_dim))
        self.decoder = nn.Sequential(nn.Linear(z_dim, 256), nn.ReLU(True), nn.Linear(256, 64 * 4 * 4), nn.ReLU(True),
                                     nn.Unflatten(1, (64, 4, 4)), nn.ConvTranspose2d(64, 64, 4, 2, 1), nn.ReLU(True),
                                     nn.ConvTranspose2d(64, 32, 4, 2, 1), nn.ReLU(True), nn.ConvTranspose2d(32, 32, 4, 2, 1),
                                     nn.ReLU(True), nn.ConvTranspose2d(32, nc, 4, 2, 1))

    def forward(self, x):
        distributions = self.encoder(x)
        mu, logvar = distributions[:, : self.z_dim], distributions[:, self.z_dim:]
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()  # CLEAN: reparameterisation noise from the default CUDA generator
        return self.decoder(z), mu, logvar


class Solver:
    def __init__(self, objective="B", beta=4, gamma=1000, C_max=25.0, C_stop_iter=1e5):
        self.net = BetaVAE_H().cuda()
        self.optim = torch.optim.Adam(self.net.parameters(), lr=5e-4, betas=(0.9, 0.999))
        self.objective, self.beta, self.gamma = objective, beta, gamma
        self.C_max, self.C_stop_iter, self.global_iter = C_max, C_stop_iter, 0
        self.loss_fn, self.decode = cg_compile(self.loss), cg_compile(self.net.decoder)
        self.kld_log = []

    def loss(self, x, C):
        x_recon, mu, logvar = self.net(x)
        recon_loss = F.binary_cross_entropy_with_logits(x_recon, x, reduction="sum") / x.size(0)
        total_kld = (-0.5 * (1 + logvar - mu.pow(2) - logvar.exp())).sum(1).mean()
        self.kld_log.append(total_kld.item())  # HAZARD: host-sync
        if self.objective == "H":  # CLEAN: Python string fixed at construction
            return recon_loss + self.beta * total_kld
        capacity = C  # HAZARD: python-scalar
        return recon_loss + self.gamma * (total_kld - capacity).abs()

    def train(self, data_loader, max_iter=1.5e6):
        self.net.train()
        while self.global_iter < max_iter:
            for x in data_loader:
                self.global_iter += 1
                C = min(self.C_max, self.C_max / self.C_stop_iter * self.global_iter)
                beta_vae_loss = self.loss_fn(x.cuda(non_blocking=True), C)  # HAZARD: dynamic-shape
                self.optim.zero_grad()
                beta_vae_loss.backward()
                self.optim.step()
                if self.global_iter % 1000 == 0:
                    print("[%d] loss %.3f" % (self.global_iter, beta_vae_loss.item()))  # CLEAN: eager read after the backward

    @torch.no_grad()
    def traverse(self, z0, limit=3.0, steps=10):
        self.net.eval()
        frames, gifs = [], []
        for row in range(self.net.z_dim):
            for val in torch.linspace(-limit, limit, steps).tolist():
                z = z0.clone()
                z[:, row] = val
                recon = self.decode(z)
                frames.append(recon)  # HAZARD: static-address
                gifs.append(torch.sigmoid(self.decode(z).clone()))  # CLEAN: cloned before the next call reuses the output
        return frames, gifs
