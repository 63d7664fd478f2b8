"""GrooVAE drum humanizer for the beat-making app: quantized MIDI drums in, human
timing offsets and velocities out. Ported from Magenta's TF GrooVAE and trained with a
small Keras-like `fit()` (callbacks, `logs` dicts) the team wrote for the port.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

STEPS, VOICES = 32, 9


class GrooVAE(nn.Module):
    def __init__(self, z=256, hidden=512):
        super().__init__()
        self.enc = nn.LSTM(3 * VOICES, hidden, batch_first=True, bidirectional=True)
        self.mu, self.logvar = nn.Linear(2 * hidden, z), nn.Linear(2 * hidden, z)
        self.dec = nn.LSTM(VOICES + z, hidden, batch_first=True, num_layers=2)
        self.head = nn.Linear(hidden, 3 * VOICES)

    def forward(self, hits, groove):
        h, _ = self.enc(groove)
        mu, logvar = self.mu(h[:, -1]), self.logvar(h[:, -1])
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        d, _ = self.dec(torch.cat([hits, z[:, None].expand(-1, STEPS, -1)], -1))
        return self.head(d), mu, logvar


class KerasLikeTrainer:
    def __init__(self, model, lr=1e-3, callbacks=()):
        self.model = model.cuda()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.callbacks = list(callbacks)
        self.loss_fn = torch.compile(self._loss, mode="reduce-overhead")
        self.opt_step = torch.compile(self.opt.step, mode="reduce-overhead")
        self.logs = {}

    def _loss(self, hits, groove, beta):
        keep = np.random.binomial(1, 0.9, size=VOICES).astype(np.float32)  # HAZARD: host-code
        out, mu, logvar = self.model(hits * torch.from_numpy(keep).to(hits.device), groove)
        h_logit, vel, off = out.split(VOICES, -1)
        recon = (F.binary_cross_entropy_with_logits(h_logit, hits)
                 + F.mse_loss(torch.sigmoid(vel) * hits, groove[..., VOICES:2 * VOICES])
                 + F.mse_loss(torch.tanh(off) * hits, groove[..., 2 * VOICES:]))
        kl = -0.5 * torch.mean(1 + logvar - mu.pow(2) - logvar.exp())
        loss = recon + beta * kl  # HAZARD: python-scalar
        self.logs["loss"] = float(loss)  # HAZARD: host-sync
        return loss

    def fit(self, loader, epochs=50, beta_max=0.2):
        step = 0
        for epoch in range(epochs):
            for cb in self.callbacks:
                cb.on_epoch_begin(epoch, self)
            for hits, groove in loader:
                hits, groove = hits.cuda(non_blocking=True), groove.cuda(non_blocking=True)  # CLEAN: eager upload before the compiled step
                beta = min(beta_max, beta_max * step / 20000)
                loss = self.loss_fn(hits, groove, beta)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.opt_step()
                self.opt.zero_grad(set_to_none=True)
                step += 1
            for cb in self.callbacks:
                cb.on_epoch_end(epoch, self.logs)


class StepDecay:
    def __init__(self, every=10, factor=0.5):
        self.every, self.factor = every, factor

    def on_epoch_begin(self, epoch, trainer):
        if epoch and epoch % self.every == 0:
            for g in trainer.opt.param_groups:
                g["lr"] = g["lr"] * self.factor  # HAZARD: optimizer

    def on_epoch_end(self, epoch, logs):
        print(f"epoch {epoch} loss {logs.get('loss', float('nan')):.4f}")  # CLEAN: eager print of a Python float


def humanize(model, hits):
    model = model.cuda().eval()
    with torch.no_grad():
        groove = torch.zeros(hits.shape[0], STEPS, 3 * VOICES, device="cuda")
        out, _, _ = model(hits.cuda(), groove)  # CLEAN: eager inference, not compiled
        _, vel, off = out.split(VOICES, -1)
    return torch.sigmoid(vel).cpu().numpy(), (torch.tanh(off) * 0.5).cpu().numpy()
