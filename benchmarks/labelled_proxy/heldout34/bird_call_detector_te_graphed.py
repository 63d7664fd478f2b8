"""Bioacoustic bird-call detector: TE transformer layers graphed with TE, a torch-graphed augmenting stem."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling

class Plugin:
    def attach(self, model):
        pass

class ParamCountPlugin(Plugin):
    def attach(self, model):
        self.n = sum(p.numel() for p in model.parameters())  # CLEAN: reads sizes, registers no hook

class ActivationPlugin(Plugin):
    def __init__(self):
        self.acts = []
    def attach(self, model):
        model.layers[0].register_forward_hook(lambda m, i, o: self.acts.append(o.detach().abs().mean()))  # HAZARD: api-misuse

class SpecStem(nn.Module):
    def __init__(self, n_mels=128, d=384):
        super().__init__()
        self.proj = nn.Linear(n_mels, d)
        self.time_mask_p = 0.0
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(3)
    def _mask(self, mel):
        keep = torch.rand(mel.shape[:2], device=mel.device, generator=self.gen) > 0.1  # HAZARD: rng
        return mel * keep.unsqueeze(-1)
    def _drop(self, h):
        p = self.time_mask_p  # HAZARD: python-scalar
        return F.dropout(h, p=p, training=True)
    def forward(self, mel):
        return self._drop(self.proj(self._mask(mel))).transpose(0, 1).contiguous()

class Detector(nn.Module):
    def __init__(self, d=384, n_layers=6, n_species=300):
        super().__init__()
        self.stem = SpecStem(d=d)
        self.layers = nn.ModuleList(
            te.TransformerLayer(d, 4 * d, 6, hidden_dropout=0.0, attention_dropout=0.0) for _ in range(n_layers))
        self.head = nn.Linear(d, n_species)

class GraphedDetector:
    def __init__(self, model, plugins, recipe, T=256, B=16):
        self.m, self.recipe = model.cuda(), recipe
        for plugin in plugins:
            plugin.attach(self.m)
        self.stem = torch.cuda.make_graphed_callables(
            self.m.stem, (torch.randn(B, T, 128, device="cuda"),))
        self.layers = self._graph_layers(T, B)
    @torch.autocast("cuda", dtype=torch.bfloat16)  # HAZARD: autocast-cache
    def _graph_layers(self, T, B):
        samples = tuple((torch.randn(T, B, 384, device="cuda", requires_grad=True),) for _ in self.m.layers)
        return te.make_graphed_callables(tuple(self.m.layers), samples, enabled=True, recipe=self.recipe)
    def forward(self, mel):
        h = self.stem(mel)
        with te.autocast(enabled=True, recipe=self.recipe):  # CLEAN: TE autocast around replays
            for layer in self.layers:
                h = layer(h)  # CLEAN: no cached quantized params, no flag needed
        return self.m.head(h.mean(0))

def train(loader, epochs=20):
    model = Detector()
    det = GraphedDetector(model, [ParamCountPlugin(), ActivationPlugin()], DelayedScaling())
    model.head.register_forward_hook(lambda m, i, o: None)  # CLEAN: eager head, hook after graphing
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for epoch in range(epochs):
        model.stem.time_mask_p = min(0.2, 0.02 * epoch)
        for mel, y in loader:
            loss = F.binary_cross_entropy_with_logits(det.forward(mel.cuda()), y.cuda())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()  # CLEAN: eager optimizer outside the graphs
