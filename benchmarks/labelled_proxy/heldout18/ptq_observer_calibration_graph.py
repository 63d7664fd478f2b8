"""Post-training static int8 quantization: activation calibration in a CUDA graph.

Every nn.Linear input gets an observer (forward pre-hook). The calibration forward,
observers included, is captured once and replayed over the calibration loader, which
is much faster than eager for the ~2k small batches we calibrate on. Scales and zero
points are computed on the host afterwards.
"""
import torch
import torch.nn as nn


class MinMaxReservoirObserver(nn.Module):
    def __init__(self, bins=2048, reservoir=4096, seed=0):
        super().__init__()
        self.register_buffer("min_val", torch.full((), float("inf")))
        self.register_buffer("max_val", torch.full((), float("-inf")))
        self.register_buffer("hist", torch.zeros(bins))
        self.register_buffer("samples", torch.zeros(reservoir))
        self.register_buffer("n_levels", torch.zeros((), dtype=torch.long))
        self.bins = bins
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(seed)
        self.calls = 0

    def forward(self, x):
        flat = x.detach().float().reshape(-1)
        lo = flat.min()
        if lo < self.min_val:  # HAZARD: dynamic-control-flow
            self.min_val.copy_(lo)
        self.max_val.copy_(torch.maximum(self.max_val, flat.max()))  # CLEAN: running max on the device, no branch
        pick = torch.randint(0, flat.numel(), (self.samples.numel(),), device=x.device, generator=self.gen)  # HAZARD: rng
        self.samples.copy_(flat.index_select(0, pick))  # CLEAN: index_select with a CUDA index tensor
        levels = torch.unique(torch.round(flat * 16.0))  # HAZARD: dynamic-shape
        self.n_levels.fill_(levels.numel())
        span = (self.max_val - self.min_val).clamp_min(1e-8)
        idx = ((flat - self.min_val) / span * self.bins).long().clamp_(0, self.bins - 1)
        self.hist.scatter_add_(0, idx, torch.ones_like(flat))  # CLEAN: scatter_add_ with a CUDA index
        self.calls += 1  # HAZARD: host-code
        return x

    def qparams(self):
        lo, hi = self.min_val.item(), self.max_val.item()  # CLEAN: host reads after calibration, outside the graph
        scale = max(hi - lo, 1e-8) / 255.0
        zero_point = int(round(-lo / scale)) - 128
        return scale, zero_point, self.calls


class GraphedCalibrator:
    def __init__(self, model: nn.Module, sample_batch: torch.Tensor):
        self.model = model.cuda().eval()
        self.observers = {}
        for name, mod in self.model.named_modules():
            if isinstance(mod, nn.Linear):
                obs = MinMaxReservoirObserver(seed=len(self.observers)).cuda()
                self.observers[name] = obs
                mod.register_forward_pre_hook(lambda m, args, o=obs: (o(args[0]),))  # CLEAN: hooks are allowed under torch.cuda.graph
        self.static_x = sample_batch.clone().cuda()
        self.graph = torch.cuda.CUDAGraph()

    @torch.no_grad()
    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                self.model(self.static_x)
        torch.cuda.current_stream().wait_stream(side)
        for obs in self.observers.values():
            obs.hist.zero_()
        with torch.cuda.graph(self.graph):
            self.model(self.static_x)

    @torch.no_grad()
    def run(self, loader, max_batches=2000):
        for i, batch in enumerate(loader):
            if i == max_batches:
                break
            self.static_x.copy_(batch, non_blocking=True)
            self.graph.replay()
        torch.cuda.synchronize()  # CLEAN: after the replay loop, outside any capture
        return {name: obs.qparams() for name, obs in self.observers.items()}
