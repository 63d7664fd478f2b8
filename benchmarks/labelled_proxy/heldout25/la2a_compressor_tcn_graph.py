"""Real-time neural optical compressor (LA-2A style) for a DAW plug-in host.

A causal TCN predicts the gain-reduction curve from the input block and the previous
envelope; the host calls `process_block` from its audio callback with 512-sample blocks.
The whole block computation is captured once with capture_begin/capture_end.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalTCN(nn.Module):
    def __init__(self, ch=24, layers=6, kernel=3):
        super().__init__()
        self.inp = nn.Conv1d(2, ch, 1)
        self.blocks = nn.ModuleList(
            nn.Conv1d(ch, ch, kernel, dilation=2 ** i) for i in range(layers))
        self.out = nn.Conv1d(ch, 1, 1)
        self.pads = [(kernel - 1) * 2 ** i for i in range(layers)]

    def forward(self, x):
        h = self.inp(x)
        for conv, pad in zip(self.blocks, self.pads):
            h = h + torch.tanh(conv(F.pad(h, (pad, 0))))
        return torch.sigmoid(self.out(h))


class NeuralLA2A:
    def __init__(self, model, block=512, sr=48000):
        self.model = model.cuda().eval()
        self.block = block
        self.params = {"peak_reduction": 0.5, "makeup_db": 0.0, "ceiling": 0.98}
        self.thresh_t = torch.tensor([0.5], device="cuda")
        self.inp = torch.zeros(1, 1, block, device="cuda")
        self.env = torch.zeros(1, 1, block, device="cuda")
        self.graph = None

    def set_param(self, name, value):
        self.params[name] = value
        if name == "peak_reduction":
            self.thresh_t.fill_(value)  # CLEAN: knob written into a device tensor the graph reads

    @torch.no_grad()
    def _tick(self):
        x = torch.cat([self.inp, self.env], dim=1)
        gr = self.model(x) * self.thresh_t
        env_new = 0.9 * self.env[..., -1:] + 0.1 * gr
        self.env = env_new.expand_as(self.env).contiguous()  # HAZARD: static-address
        makeup = 10.0 ** (self.params["makeup_db"] / 20.0)  # HAZARD: python-scalar
        y = self.inp * (1.0 - gr) * makeup
        peak = y.abs().amax()
        if peak > 1.0:  # HAZARD: dynamic-control-flow
            y = y / peak
        ceiling = self.params["ceiling"]
        y = torch.where(y.abs() > ceiling, torch.sign(y) * ceiling, y)  # CLEAN: device-side soft ceiling
        return y

    def prepare(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(4):
                self._tick()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        self.graph.capture_begin()  # HAZARD: stream
        self.out = self._tick()
        self.graph.capture_end()

    def process_block(self, samples):
        self.inp.copy_(samples.view(1, 1, -1))  # CLEAN: static input updated in place
        self.graph.replay()
        return self.out.view(-1)


def run_session(plugin, blocks, meter):
    plugin.prepare()
    for i, blk in enumerate(blocks):
        out = plugin.process_block(blk.cuda(non_blocking=True))
        meter.push(out.abs().max().item())  # CLEAN: meter read in eager code after replay
        if i == 200:
            plugin.set_param("makeup_db", 3.0)
            plugin.set_param("peak_reduction", 0.65)
