"""Protein-ligand pose scoring trunk on Transformer Engine layers, graphed with TE make_graphed_callables."""
import contextlib
import torch
import torch.nn as nn
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling

class ShapeProbe:
    def __init__(self):
        self.seen = []
    def install(self, module):
        return module.register_forward_pre_hook(self._pre)  # HAZARD: api-misuse
    def _pre(self, module, args):
        self.seen.append(tuple(args[0].shape))

class PoseNoise(nn.Module):
    def __init__(self, d, sigma=0.05):
        super().__init__()
        self.proj, self.sigma = nn.Linear(d, d), sigma
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(11)
    def forward(self, h):
        jitter = torch.randn(h.shape, device=h.device, generator=self.gen)  # HAZARD: rng
        return self.proj(h) + self.sigma * jitter

class Trunk(nn.Module):
    def __init__(self, d=512, n_layers=4):
        super().__init__()
        self.layers = nn.ModuleList(
            te.TransformerLayer(d, 4 * d, 16, hidden_dropout=0.0, attention_dropout=0.0) for _ in range(n_layers))
        self.noise = PoseNoise(d).cuda()
        self.head = nn.Linear(d, 1).cuda()

class GraphBuilder:
    def __init__(self, trunk, recipe, probe):
        self.trunk, self.recipe, self.probe = trunk, recipe, probe
    @contextlib.contextmanager
    def _precision(self):
        with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
            yield
    def _samples(self, seq, batch, d):
        return tuple((torch.randn(seq, batch, d, device="cuda", requires_grad=True),) for _ in self.trunk.layers)
    def build(self, seq=128, batch=8, d=512):
        self.probe.install(self.trunk.layers[0])
        with self._precision():
            layers = te.make_graphed_callables(
                tuple(self.trunk.layers), self._samples(seq, batch, d),
                enabled=True, recipe=self.recipe, cache_quantized_params=True)
        noise = torch.cuda.make_graphed_callables(
            self.trunk.noise, (torch.randn(seq, batch, d, device="cuda", requires_grad=True),))
        return list(layers), noise

class PoseScorer:
    def __init__(self):
        self.recipe = DelayedScaling()
        self.trunk = Trunk().cuda()
        self.layers, self.noise = GraphBuilder(self.trunk, self.recipe, ShapeProbe()).build()
        self.trunk.head.register_forward_hook(lambda m, i, o: None)  # CLEAN: hook on an eager head, not graphed
        self.opt = torch.optim.AdamW(self.trunk.parameters(), lr=1e-4)
    def _run_layers(self, h, first):
        for layer in self.layers:
            h = layer(h, is_first_microbatch=first)  # CLEAN: flag passed on every training replay
        return h
    def _run_layers_eval(self, h):
        for layer in self.layers:
            h = layer(h)  # HAZARD: api-misuse
        return h
    def train_micro(self, feats, target, first):
        with te.autocast(enabled=True, recipe=self.recipe):  # CLEAN: TE autocast around replays
            h = self._run_layers(feats, first)
        h = self.noise(h)
        loss = torch.nn.functional.mse_loss(self.trunk.head(h.float()).squeeze(-1), target)
        loss.backward()
        return loss.detach()
    def accumulate(self, micro_batches):
        self.opt.zero_grad(set_to_none=False)
        losses = [self.train_micro(f, t, i == 0) for i, (f, t) in enumerate(micro_batches)]
        self.opt.step()  # CLEAN: eager optimizer step
        return torch.stack(losses).mean().item()  # CLEAN: host read outside any graph
    @torch.no_grad()
    def score(self, feats):
        with te.autocast(enabled=True, recipe=self.recipe):
            return self.trunk.head(self._run_layers_eval(feats).float())
