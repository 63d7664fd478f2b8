"""Stochastic DDIM (eta > 0) sampler whose per-step update is captured once with
capture_begin/capture_end and replayed for every timestep."""
import torch
import torch.nn as nn


class DDIMGraphSampler:
    def __init__(self, unet: nn.Module, alphas_cumprod, num_steps=50, eta=1.0,
                 shape=(4, 4, 64, 64), seed=1234):
        self.unet = unet
        ts = torch.linspace(999, 0, num_steps).long()
        self.ts = ts.tolist()
        ac = alphas_cumprod[ts].float()
        prev = torch.cat([ac[1:], ac.new_ones(1)])
        self.sigmas = (eta * ((1 - prev) / (1 - ac) * (1 - ac / prev)).sqrt()).tolist()
        self.ac_dev = ac.cuda()
        self.prev_dev = prev.cuda()
        self.step = 0
        self.step_dev = torch.zeros(1, dtype=torch.long, device="cuda")
        self.t_buf = torch.zeros(shape[0], dtype=torch.long, device="cuda")
        self.x = torch.randn(shape, device="cuda")
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(seed)  # CLEAN: seeding the generator before any capture
        self.graph = None

    def reset(self):
        self.step = 0
        self.step_dev.zero_()
        self.x.normal_()

    def _step(self):
        a_t = self.ac_dev.index_select(0, self.step_dev)  # CLEAN: schedule value gathered with a device index
        a_prev = self.prev_dev.index_select(0, self.step_dev)
        eps = self.unet(self.x, self.t_buf)
        x0 = (self.x - (1 - a_t).sqrt() * eps) / a_t.sqrt()
        sigma = self.sigmas[self.step]  # HAZARD: python-scalar
        noise = torch.randn(self.x.shape, device="cuda", generator=self.gen)  # HAZARD: rng
        dir_xt = (1 - a_prev - sigma ** 2).clamp(min=0).sqrt() * eps
        self.x.copy_(a_prev.sqrt() * x0 + dir_xt + sigma * noise)
        self.step_dev.add_(1)
        self.step += 1  # HAZARD: host-code

    @torch.no_grad()
    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        self.reset()
        self.graph = torch.cuda.CUDAGraph()
        self.graph.capture_begin()  # HAZARD: stream
        self._step()
        self.graph.capture_end()

    @torch.no_grad()
    def sample(self):
        if self.graph is None:
            self.capture()
        self.reset()
        for t in self.ts:
            self.t_buf.fill_(t)  # CLEAN: timestep written into the static buffer before replay
            self.graph.replay()
        return self.x.clone()
