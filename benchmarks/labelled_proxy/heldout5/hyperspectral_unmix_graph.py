"""Hyperspectral unmixing autoencoder (softmax abundances, non-negative endmember decoder).

Pixels are sampled from a cube kept on the GPU; the training step is replayed from one CUDA graph.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class UnmixAE(nn.Module):
    def __init__(self, bands=162, n_end=4, hidden=128):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(bands, hidden), nn.LeakyReLU(0.1), nn.BatchNorm1d(hidden),
                                 nn.Linear(hidden, n_end))
        self.endmembers = nn.Parameter(torch.rand(bands, n_end))

    def forward(self, x):
        abund = F.softmax(self.enc(x) * 3.5, -1)
        return abund @ self.endmembers.t(), abund


def sad(a, b):
    cos = F.cosine_similarity(a, b, dim=-1).clamp(-1 + 1e-6, 1 - 1e-6)
    return torch.acos(cos).mean()


class UnmixTrainer:
    def __init__(self, cube, good_bands, batch=4096, device="cuda"):
        self.cube = torch.from_numpy(cube.reshape(-1, cube.shape[-1])).to(device)  # (pixels, all bands)
        self.good_bands = good_bands  # band indices left after removing water-vapour absorption bands
        self.model = UnmixAE(bands=len(good_bands)).to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, capturable=True)
        self.sched = torch.optim.lr_scheduler.StepLR(self.opt, step_size=50, gamma=0.5)
        self.sparsity = 0.0
        self.batch = batch
        self.pix_idx_np = np.zeros(batch, dtype=np.int64)

    def step(self):
        idx = torch.from_numpy(self.pix_idx_np).to(self.cube.device)  # HAZARD: pinned-memory
        x = self.cube[idx][:, self.good_bands]  # HAZARD: host-sync
        with torch.autocast("cuda", dtype=torch.bfloat16):  # CLEAN: autocast entered inside the capture
            recon, abund = self.model(x)
        lam = self.sparsity  # HAZARD: python-scalar
        loss = sad(recon.float(), x) + lam * abund.float().clamp(min=1e-8).sqrt().sum(-1).mean()
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()  # CLEAN: AdamW with capturable=True
        with torch.no_grad():
            self.model.endmembers.clamp_(min=0.0)  # CLEAN: in-place projection of a parameter, replayed every step
        return loss.detach()

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.loss = self.step()

    def fit(self, epochs=200, iters=20):
        self.capture()
        for epoch in range(epochs):
            self.sparsity = 1e-3 * min(1.0, epoch / 50)
            for _ in range(iters):
                self.pix_idx_np[:] = np.random.randint(0, self.cube.shape[0], self.batch)
                self.graph.replay()
            self.sched.step()  # HAZARD: optimizer
            if epoch % 20 == 0:
                print(f"epoch {epoch}: SAD {self.loss.item():.4f}")  # CLEAN: .item() after replay, outside the graph

    @torch.no_grad()
    def abundance_maps(self, shape_hw):
        self.model.eval()
        maps = [self.model(chunk[:, self.good_bands])[1] for chunk in self.cube.split(65536)]
        return torch.cat(maps).view(*shape_hw, -1).permute(2, 0, 1).cpu()


if __name__ == "__main__":
    cube = np.random.rand(95, 95, 188).astype(np.float32)
    good = [b for b in range(188) if not (100 <= b < 113 or 140 <= b < 153)]
    tr = UnmixTrainer(cube, good[:162])
    tr.fit(epochs=3)
    print(tr.abundance_maps((95, 95)).shape)
