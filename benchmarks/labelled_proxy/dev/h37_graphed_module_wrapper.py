"""Drop-in wrapper that lazily captures any nn.Module on first call (device agnostic)."""
import torch
import torch.nn as nn


class GraphedModule:
    def __init__(self, module, device="cuda", amp=True):
        self.module = module
        self.device = device
        self.amp = amp
        self.dev = torch.get_device_module(device)
        self.graph = None
        self.static_in = None
        self.static_out = None
        self.outputs = []

    def _capture(self, x):
        self.static_in = x.clone()
        side = self.dev.Stream()
        side.wait_stream(self.dev.current_stream())
        with self.dev.stream(side):
            for _ in range(3):
                self.module(self.static_in)
        self.dev.current_stream().wait_stream(side)
        self.graph = self.dev.CUDAGraph()
        with torch.autocast(self.device, dtype=torch.bfloat16, enabled=self.amp):  # HAZARD: autocast-cache
            with self.dev.graph(self.graph, stream=self.dev.default_stream()):  # HAZARD: stream
                self.static_out = self.module(self.static_in)

    def __call__(self, x):
        if self.graph is None:  # CLEAN: lazy one-time capture
            self._capture(x)
        self.static_in.copy_(x)
        self.graph.replay()
        self.outputs.append(self.static_out)  # HAZARD: static-address
        return self.static_out


class Smoother(nn.Module):
    def __init__(self, dim=256, eps=1e-3):
        super().__init__()
        self.lin = nn.Linear(dim, dim)
        self.alpha = 0.9
        self.eps = eps

    def set_alpha(self, a: float):
        self.alpha = a

    def forward(self, x):
        y = self.lin(x)
        small = y[y.abs() < self.eps]  # HAZARD: dynamic-shape
        y = self.alpha * y + (1 - self.alpha) * x  # HAZARD: python-scalar
        return y - small.mean()


def run(stream_of_batches):
    sm = Smoother().cuda().eval()
    wrapped = GraphedModule(sm)
    with torch.no_grad():
        for i, x in enumerate(stream_of_batches):
            sm.set_alpha(0.9 if i < 100 else 0.99)
            y = wrapped(x.cuda())
    return y
