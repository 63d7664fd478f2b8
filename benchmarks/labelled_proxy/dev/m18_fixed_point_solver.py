"""Deep-equilibrium style layer: fixed-point iterations captured into one CUDA graph."""
import torch
import torch.nn as nn


class DEQLayer(nn.Module):
    def __init__(self, dim, max_iters=30, tol=1e-4, check_finite=False):
        super().__init__()
        self.f = nn.Sequential(nn.Linear(dim, dim), nn.Tanh())
        self.max_iters = max_iters
        self.tol = tol
        self.check_finite = check_finite

    def forward(self, x):
        z = torch.zeros_like(x)
        it = 0
        delta = torch.full((), float("inf"), device=x.device)
        while delta > self.tol and it < self.max_iters:  # HAZARD: dynamic-control-flow
            z_next = self.f(z + x)
            delta = (z_next - z).norm() / (z.norm() + 1e-8)
            z = z_next
            it += 1
        if self.check_finite:  # CLEAN: bool flag from __init__
            assert torch.isfinite(z).all()  # HAZARD: dynamic-control-flow
        for _ in range(self.max_iters):  # CLEAN: loop bound is a constant Python int
            z = 0.5 * z + 0.5 * self.f(z + x)
        return z


def capture(model, batch=32, dim=256):
    static_x = torch.randn(batch, dim, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(3):
            model(static_x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g):
        static_z = model(static_x)
    return g, static_x, static_z


if __name__ == "__main__":
    layer = DEQLayer(256, check_finite=True).cuda().eval()
    g, sx, sz = capture(layer)
    results = []
    for _ in range(10):
        sx.copy_(torch.randn_like(sx))
        g.replay()
        results.append(sz)  # HAZARD: static-address
    print(torch.stack(results).norm().item())
