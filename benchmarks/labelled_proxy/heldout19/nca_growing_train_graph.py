"""Growing Neural Cellular Automata (Mordvintsev et al., Distill 2020), PyTorch port -- lab prototype.
The NCA rollout + backward + Adam update is captured once as a CUDA graph and replayed every
iteration; the sample pool is managed in Python between replays.  Usage: --target lizard.png"""
import argparse
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CH, SIZE, POOL, BATCH = 16, 40, 1024, 8

def load_target(path):
    from PIL import Image
    img = Image.open(path).convert("RGBA").resize((SIZE - 8, SIZE - 8))
    a = np.asarray(img, dtype=np.float32) / 255.0
    a[..., :3] *= a[..., 3:]
    a = np.pad(a, ((4, 4), (4, 4), (0, 0)))
    return torch.from_numpy(a).permute(2, 0, 1).contiguous()

class CA(nn.Module):
    def __init__(self, fire_rate=0.5):
        super().__init__()
        sobel = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]]) / 8.0
        ident = torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
        self.register_buffer("kernel", torch.stack([ident, sobel, sobel.T]).repeat(CH, 1, 1).unsqueeze(1))
        self.w1, self.w2 = nn.Conv2d(CH * 3, 128, 1), nn.Conv2d(128, CH, 1, bias=False)
        nn.init.zeros_(self.w2.weight)
        self.fire_rate = fire_rate

    @staticmethod
    def alive(x):
        return F.max_pool2d(x[:, 3:4], 3, stride=1, padding=1) > 0.1

    def forward(self, x):
        pre = self.alive(x)
        y = F.conv2d(x, self.kernel, padding=1, groups=CH)
        dx = self.w2(F.relu(self.w1(y)))
        fire = torch.rand(x.shape[0], 1, SIZE, SIZE, device=x.device) <= self.fire_rate  # CLEAN: default CUDA generator, new offset on every replay
        x = x + dx * fire.float()
        return x * (pre & self.alive(x)).float()

def damage(x, gen):
    """Erase a random disc from the last two samples of the batch (regeneration training)."""
    yy, xx = torch.meshgrid(*[torch.linspace(-1.0, 1.0, SIZE, device=x.device)] * 2, indexing="ij")
    c = torch.rand(2, 2, 1, 1, device=x.device, generator=gen) - 0.5  # HAZARD: rng
    hole = ((yy - c[:, 0]) ** 2 + (xx - c[:, 1]) ** 2) < 0.16
    keep = torch.ones(x.shape[0], 1, SIZE, SIZE, device=x.device)
    keep[-2:] = (~hole).unsqueeze(1).float()
    return x * keep

class Trainer:
    def __init__(self, target, lr=2e-3):
        self.dev = torch.device("cuda")
        self.ca = CA().to(self.dev)
        self.opt = torch.optim.Adam(self.ca.parameters(), lr=lr, capturable=True)  # CLEAN: capturable Adam, step counters live on the GPU
        self.sched = torch.optim.lr_scheduler.MultiStepLR(self.opt, [2000], 0.1)
        self.target = target.to(self.dev)
        self.seed = torch.zeros(CH, SIZE, SIZE, device=self.dev)
        self.seed[3:, SIZE // 2, SIZE // 2] = 1.0
        self.pool = self.seed.repeat(POOL, 1, 1, 1)
        self.x_in, self.x_out = self.pool[:BATCH].clone(), torch.empty_like(self.pool[:BATCH])
        self.dmg_gen = torch.Generator(device="cuda").manual_seed(1234)
        self.losses, self.graph = [], None

    def _step(self):
        self.opt.zero_grad(set_to_none=True)
        x = damage(self.x_in, self.dmg_gen)
        n_iter = np.random.randint(64, 97)  # HAZARD: host-code
        for _ in range(n_iter):
            x = self.ca(x)
        loss = F.mse_loss(x[:, :4], self.target.expand(BATCH, -1, -1, -1))
        loss.backward()
        for p in self.ca.parameters():
            p.grad.div_(p.grad.norm() + 1e-8)  # CLEAN: per-parameter grad normalisation is plain device math
        self.opt.step()
        self.x_out.copy_(x.detach())
        self.losses.append(loss.item())  # HAZARD: host-sync

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._step()

    def fit(self, iters):
        for it in range(iters):
            idx = np.random.choice(POOL, BATCH, replace=False)  # CLEAN: pool sampling runs eagerly, between replays
            idx_t = torch.as_tensor(idx, device=self.dev)
            batch = torch.cat([self.seed[None], self.pool[idx_t[1:]]])
            self.x_in.copy_(batch)  # CLEAN: copy_ into the captured input
            if self.graph is None:
                self.capture()
            self.graph.replay()
            self.pool[idx_t] = self.x_out
            self.sched.step()  # HAZARD: optimizer
            if it % 100 == 0:
                print(it, float(self.x_out[:, 3].mean()))

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True), ap.add_argument("--iters", type=int, default=8000)
    args = ap.parse_args()
    tr = Trainer(load_target(args.target))
    tr.fit(args.iters)
    torch.save(tr.ca.state_dict(), "nca.pt")
