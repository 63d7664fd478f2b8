"""VQ-VAE image tokenizer with an EMA codebook and dead-code restarts.

Encoder, quantizer (with its EMA statistics), decoder and the AdamW step run as one
captured training step; the data loader only copies each batch into the static input.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class VectorQuantizerEMA(nn.Module):
    def __init__(self, n_codes=1024, dim=64, decay=0.99, eps=1e-5, beta=0.25):
        super().__init__()
        self.n_codes, self.decay, self.eps, self.beta = n_codes, decay, eps, beta
        self.register_buffer("embed", torch.randn(n_codes, dim))
        self.register_buffer("embed_avg", self.embed.clone())
        self.register_buffer("cluster_size", torch.zeros(n_codes))
        self.restart_gen = torch.Generator(device="cuda")
        self.restart_gen.manual_seed(2024)
        self.last_perplexity = 0.0

    def forward(self, z):
        b, c, h, w = z.shape
        flat = z.permute(0, 2, 3, 1).reshape(-1, c)
        dist = flat.pow(2).sum(1, keepdim=True) - 2 * flat @ self.embed.t() + self.embed.pow(2).sum(1)
        idx = dist.argmin(1)
        onehot = F.one_hot(idx, self.n_codes).type(flat.dtype)  # CLEAN: one_hot with a fixed class count
        quant = self.embed.index_select(0, idx).view(b, h, w, c).permute(0, 3, 1, 2)
        if self.training:
            with torch.no_grad():
                self.cluster_size.mul_(self.decay).add_(onehot.sum(0), alpha=1 - self.decay)  # CLEAN: in-place EMA keeps the buffer address
                self.embed_avg.mul_(self.decay).add_(onehot.t() @ flat, alpha=1 - self.decay)
                n = self.cluster_size.sum()
                size = (self.cluster_size + self.eps) / (n + self.n_codes * self.eps) * n
                self.embed = self.embed_avg / size.unsqueeze(1)  # HAZARD: static-address
                self._restart_dead(flat)
        avg_p = onehot.mean(0)
        perplexity = torch.exp(-(avg_p * torch.log(avg_p + 1e-10)).sum())
        self.last_perplexity = float(perplexity)  # HAZARD: host-sync
        commit = F.mse_loss(z, quant.detach())
        quant = z + (quant - z).detach()
        return quant, self.beta * commit

    def _restart_dead(self, flat):
        pick = torch.randint(0, flat.shape[0], (self.n_codes,), device=flat.device,
                             generator=self.restart_gen)  # HAZARD: rng
        dead = (self.cluster_size < 1.0).unsqueeze(1)
        self.embed_avg.copy_(torch.where(dead, flat[pick], self.embed_avg))
        self.cluster_size.copy_(torch.where(dead.squeeze(1), torch.ones_like(self.cluster_size), self.cluster_size))


def conv_stack(chs, down=True):
    layers = []
    for a, b in zip(chs[:-1], chs[1:]):
        conv = nn.Conv2d(a, b, 4, 2, 1) if down else nn.ConvTranspose2d(a, b, 4, 2, 1)
        layers += [conv, nn.ReLU()]
    return nn.Sequential(*layers[:-1])


class VQVAETrainer:
    def __init__(self, batch=64, img=128):
        self.enc = conv_stack([3, 64, 128, 64]).cuda()
        self.vq = VectorQuantizerEMA().cuda()
        self.dec = conv_stack([64, 128, 64, 3], down=False).cuda()
        params = list(self.enc.parameters()) + list(self.dec.parameters())
        self.opt = torch.optim.AdamW(params, lr=2e-4, betas=(0.9, 0.99), capturable=True)
        self.x = torch.zeros(batch, 3, img, img, device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        z = self.enc(self.x)
        quant, commit = self.vq(z)
        recon = self.dec(quant)
        loss = F.mse_loss(recon, self.x) + commit
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()  # CLEAN: capturable AdamW
        torch.cuda.empty_cache()  # HAZARD: memory
        return loss.detach()

    def capture(self, warmup=3):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(warmup):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.loss = self._step()

    def train_epoch(self, loader):
        for images in loader:
            self.x.copy_(images, non_blocking=True)  # CLEAN: copy into the static batch
            self.graph.replay()
        return self.loss.item()
