import torch
import torch.nn as nn


class DDIMStepGraph:
    """Captures a single DDIM update; the sampling loop becomes a chain of replays."""

    def __init__(self, unet: nn.Module, alphas_cumprod: torch.Tensor, shape, eta: float = 0.0,
                 stride: int = 20, device: str = "cuda"):
        self.unet = unet
        self.alphas = alphas_cumprod.to(device)
        self.x = torch.randn(shape, device=device)
        self.t_index = len(alphas_cumprod) - 1
        self.stride = stride
        self.eta = eta
        self.gen = torch.Generator(device=device)
        self.gen.manual_seed(0)
        self.graph = torch.cuda.CUDAGraph()
        self.out = None

    def _update(self):
        t_idx = self.t_index  # HAZARD: python-scalar
        t = torch.tensor([t_idx], device=self.x.device)  # HAZARD: pinned-memory
        a_t = self.alphas[t_idx]
        a_prev = self.alphas[max(t_idx - self.stride, 0)]
        eps = self.unet(self.x, t)
        x0 = (self.x - (1 - a_t).sqrt() * eps) / a_t.sqrt()
        sigma = self.eta * ((1 - a_prev) / (1 - a_t) * (1 - a_t / a_prev)).sqrt()  # CLEAN: eta is fixed at construction and never changed after capture
        noise = torch.randn(self.x.shape, device=self.x.device, generator=self.gen)  # HAZARD: rng
        return a_prev.sqrt() * x0 + (1 - a_prev - sigma ** 2).sqrt() * eps + sigma * noise

    def capture(self):
        for _ in range(2):
            self._update()
        torch.cuda.synchronize()  # CLEAN: synchronize before capture_begin, outside the region
        self.graph.capture_begin()  # HAZARD: stream
        self.out = self._update()
        self.graph.capture_end()

    @torch.no_grad()
    def sample(self):
        self.capture()
        for t in range(len(self.alphas) - 1, 0, -self.stride):
            self.t_index = t
            self.graph.replay()
            self.x.copy_(self.out)
        return self.x.clone()  # CLEAN: result cloned out of the graph-owned buffer


class ToyUNet(nn.Module):
    def __init__(self, ch=4):
        super().__init__()
        self.t_embed = nn.Embedding(1000, ch)
        self.net = nn.Sequential(nn.Conv2d(ch, 64, 3, padding=1), nn.SiLU(), nn.Conv2d(64, ch, 3, padding=1))

    def forward(self, x, t):
        return self.net(x + self.t_embed(t)[:, :, None, None])


if __name__ == "__main__":
    betas = torch.linspace(1e-4, 0.02, 1000)
    alphas_cumprod = torch.cumprod(1 - betas, dim=0)
    sampler = DDIMStepGraph(ToyUNet().cuda().eval(), alphas_cumprod, (1, 4, 64, 64))
    img = sampler.sample()
    print(img.shape)
