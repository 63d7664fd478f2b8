"""Porto Seguro's Safe Driver Prediction -- 1st-place style denoising autoencoder with swap noise.
RankGauss inputs, 3 x 1500 ReLU DAE whose hidden activations feed a small MLP.  Compile settings
come from a dataclass; training phases are dispatched by name."""
from dataclasses import asdict, dataclass, field
import numpy as np
import pandas as pd
import torch
import torch.nn as nn
import torch.nn.functional as F
from scipy.special import erfinv

@dataclass
class CompileCfg:
    mode: str = "max-autotune"
    dynamic: bool = False

@dataclass
class Cfg:
    batch: int = 128
    dae_epochs: int = 1000
    swap_p: float = 0.15
    lr: float = 3e-3
    compile: CompileCfg = field(default_factory=CompileCfg)
    mlp_compile: CompileCfg = field(default_factory=lambda: CompileCfg(mode="max-autotune-no-cudagraphs", dynamic=True))

def rank_gauss(x):
    r = np.argsort(np.argsort(x, 0), 0) / (len(x) - 1) * 2 - 1
    return erfinv(np.clip(r, -1 + 1e-6, 1 - 1e-6)).astype(np.float32)

def swap_noise(x, p):
    mask = torch.rand(x.shape, device=x.device) < p  # CLEAN: default CUDA generator
    shift = np.random.randint(1, x.shape[0])  # HAZARD: host-code
    return torch.where(mask, x.roll(shift, dims=0), x)

class DAE(nn.Module):
    def __init__(self, n_in, h=1500):
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(n_in, h), nn.Linear(h, h), nn.Linear(h, h)
        self.out = nn.Linear(h, n_in)

    def encode(self, x):
        a = F.relu(self.l1(x))
        b = F.relu(self.l2(a))
        return torch.cat([a, b, F.relu(self.l3(b))], 1)

    def forward(self, x):
        return self.out(F.relu(self.l3(F.relu(self.l2(F.relu(self.l1(x)))))))

class Trainer:
    def __init__(self, cfg, n_in):
        self.cfg, self.dae = cfg, DAE(n_in).cuda()
        self.mlp = nn.Sequential(nn.Linear(4500, 1000), nn.ReLU(), nn.Dropout(0.5), nn.Linear(1000, 1)).cuda()
        self.opt = torch.optim.Adam(self.dae.parameters(), lr=cfg.lr)
        self.sched = torch.optim.lr_scheduler.ExponentialLR(self.opt, 0.995)
        self.mlp_opt = torch.optim.Adam(self.mlp.parameters(), lr=1e-4)
        self.swap_p = cfg.swap_p
        self.dae_step = torch.compile(self._dae_step, **asdict(cfg.compile))
        self.opt_step = torch.compile(self.opt.step, **asdict(cfg.compile))
        self.encode = torch.compile(self.dae.encode, **asdict(cfg.compile))
        self.mlp_step = torch.compile(self._mlp_step, **asdict(cfg.mlp_compile))  # CLEAN: max-autotune-no-cudagraphs twin for the supervised head

    def _dae_step(self, x):
        p = self.swap_p  # HAZARD: python-scalar
        return F.mse_loss(self.dae(swap_noise(x, p)), x)

    def _mlp_step(self, feats, y):
        return F.binary_cross_entropy_with_logits(self.mlp(feats).squeeze(1), y)

    def run(self, phase, *args):
        return getattr(self, f"{phase}_epoch")(*args)

    def dae_epoch(self, X, epoch):
        self.swap_p = self.cfg.swap_p * (1.0 - 0.5 * epoch / self.cfg.dae_epochs)
        perm = torch.randperm(len(X), device="cuda")
        for i in range(0, len(X) - self.cfg.batch + 1, self.cfg.batch):
            loss = self.dae_step(X[perm[i:i + self.cfg.batch]])
            if i == 0 and epoch % 50 == 0:
                print(f"dae epoch {epoch} loss {loss.item():.5f}")  # CLEAN: loss read before backward and before the compiled opt.step
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt_step()
        self.sched.step()  # HAZARD: optimizer

    @torch.no_grad()
    def features_epoch(self, X):
        feats = []
        for i in range(0, len(X), self.cfg.batch):
            feats.append(self.encode(X[i:i + self.cfg.batch]))  # HAZARD: static-address
        return torch.cat(feats)

    def mlp_epoch(self, feats, y):
        perm = torch.randperm(len(feats), device="cuda")
        for i in range(0, len(feats), 256):                       # ragged last batch, no CUDA graphs here
            loss = self.mlp_step(feats[perm[i:i + 256]], y[perm[i:i + 256]])
            self.mlp_opt.zero_grad(set_to_none=True)
            loss.backward()
            self.mlp_opt.step()

if __name__ == "__main__":
    tr, te = (pd.read_csv(f"../input/porto-seguro-safe-driver-prediction/{n}.csv") for n in ("train", "test"))
    cols = [c for c in tr.columns if c not in ("id", "target") and not c.startswith("ps_calc_")]
    X = torch.from_numpy(rank_gauss(pd.concat([tr[cols], te[cols]]).values.astype(np.float64))).cuda()
    cfg = Cfg()
    t = Trainer(cfg, X.shape[1])
    for epoch in range(cfg.dae_epochs):
        t.run("dae", X, epoch)
    n_pad = (-len(X)) % cfg.batch                                 # pad so every encode call has the same shape
    feats = t.run("features", torch.cat([X, X[:n_pad]]))[:len(X)]
    for epoch in range(5):
        t.run("mlp", feats[:len(tr)], torch.from_numpy(tr.target.values.astype(np.float32)).cuda())
