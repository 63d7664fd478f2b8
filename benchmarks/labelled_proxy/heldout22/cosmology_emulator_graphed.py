"""CosmoPower-style neural emulator of the linear matter power spectrum log P(k) from six cosmological
parameters, driven by a hydra-like nested config dict; the emulator is graphed with
torch.cuda.make_graphed_callables for training."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIG = {
    "emulator": {"n_params": 6, "hidden": [512, 512, 512, 512], "n_k": 420, "k_max": 10.0},
    "train": {"batch": 1024, "lr": 1e-3, "epochs": 200, "param_jitter": 1e-3},
    "seed": 42,
}
PARAM_NAMES = ("omega_b", "omega_cdm", "h", "n_s", "ln10^10A_s", "z")

class CosmoActivation(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.beta, self.gamma = nn.Parameter(torch.randn(dim)), nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return (self.gamma + torch.sigmoid(self.beta * x) * (1 - self.gamma)) * x

class PowerSpectrumEmulator(nn.Module):
    def __init__(self, cfg, param_stats, seed):
        super().__init__()
        dims = [cfg["n_params"]] + cfg["hidden"]
        layers = []
        for a, b in zip(dims[:-1], dims[1:]):
            layers += [nn.Linear(a, b), CosmoActivation(b)]
        self.net = nn.Sequential(*layers, nn.Linear(dims[-1], cfg["n_k"]))
        self.param_stats_np = param_stats
        self.register_buffer("k_grid", torch.logspace(-4, 1, cfg["n_k"]))
        self.k_max = cfg["k_max"]
        self.jitter = 0.0
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(seed)

    def forward(self, theta):
        stats = torch.as_tensor(self.param_stats_np, device=theta.device)  # HAZARD: pinned-memory
        x = (theta - stats[0]) / stats[1]
        if self.training:
            x = x + self.jitter * torch.randn(x.shape, device=x.device, generator=self.gen)  # HAZARD: rng
        log_pk = self.net(x)
        return log_pk[:, self.k_grid <= self.k_max]  # HAZARD: dynamic-shape

def latin_hypercube(n, lo, hi, rng):
    u = (rng.permuted(np.tile(np.arange(n), (len(lo), 1)), axis=1).T + rng.random((n, len(lo)))) / n
    return lo + u * (hi - lo)

def main(train_theta, train_logpk, test_theta, test_logpk):
    cfg = CONFIG
    stats = np.stack([train_theta.mean(0), train_theta.std(0)]).astype(np.float32)
    emu = PowerSpectrumEmulator(cfg["emulator"], stats, cfg["seed"]).cuda().train()
    emu.jitter = cfg["train"]["param_jitter"]
    sample = torch.randn(cfg["train"]["batch"], cfg["emulator"]["n_params"], device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: autocast without its cache
        emu = torch.cuda.make_graphed_callables(emu, (sample,))
    opt = torch.optim.Adam(emu.parameters(), lr=cfg["train"]["lr"])
    x_all = torch.from_numpy(train_theta.astype(np.float32)).cuda()  # CLEAN: uploaded once, before any replay
    y_all = torch.from_numpy(train_logpk.astype(np.float32)).cuda()
    for epoch in range(cfg["train"]["epochs"]):
        perm = torch.randperm(len(x_all), device="cuda")
        for i in range(0, len(x_all) - cfg["train"]["batch"] + 1, cfg["train"]["batch"]):
            idx = perm[i:i + cfg["train"]["batch"]]
            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
                pred = emu(theta=x_all[idx])  # HAZARD: api-misuse
            loss = F.mse_loss(pred.float(), y_all[idx])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=False)
    emu.eval()
    with torch.no_grad():
        pred = emu(torch.from_numpy(test_theta.astype(np.float32)).cuda())  # CLEAN: eval mode runs the original forward eagerly
    return (pred - torch.from_numpy(test_logpk.astype(np.float32)).cuda()).abs().max().item()

if __name__ == "__main__":
    rng = np.random.default_rng(CONFIG["seed"])
    lo, hi = np.array([0.02, 0.1, 0.6, 0.9, 2.5, 0.0]), np.array([0.025, 0.14, 0.8, 1.0, 3.5, 3.0])
    theta = latin_hypercube(200_000, lo, hi, rng)
    logpk = rng.normal(size=(200_000, CONFIG["emulator"]["n_k"]))
    print("max abs err", main(theta[:190_000], logpk[:190_000], theta[190_000:], logpk[190_000:]))
