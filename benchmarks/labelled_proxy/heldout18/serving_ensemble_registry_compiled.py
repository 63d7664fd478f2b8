"""Model-ensemble pipeline of a serving framework (Triton-ensemble-like, in Python).

Steps are registered by name with their compile options; the pipeline resolves each
step with getattr and runs preprocess -> encoder -> classifier, all compiled with
mode="reduce-overhead". Requests arrive through a dynamic batcher.
"""
import torch
import torch.nn as nn

STEP_REGISTRY = {}


def register_step(name, **compile_kwargs):
    def deco(fn):
        STEP_REGISTRY[name] = (fn.__name__, compile_kwargs)
        return fn
    return deco


class Encoder(nn.Module):
    def __init__(self, d_in, d):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, d), nn.GELU(), nn.Linear(d, d), nn.LayerNorm(d))

    def forward(self, x):
        return self.net(x)


class Classifier(nn.Module):
    def __init__(self, d, n_cls):
        super().__init__()
        self.fc = nn.Linear(d, n_cls)

    def forward(self, emb):
        logits = self.fc(emb)
        print("classifier max logit", logits.max())  # HAZARD: host-code
        return logits.softmax(-1)


class EnsemblePipeline:
    def __init__(self, d_in, d, n_cls, mean, std):
        self.encoder = Encoder(d_in, d).cuda().eval()
        self.classifier = Classifier(d, n_cls).cuda().eval()
        self.mean = mean.cuda()
        self.std = std.cuda()
        self.steps = {}
        for name, (attr, kwargs) in STEP_REGISTRY.items():
            self.steps[name] = torch.compile(getattr(self, attr), **kwargs)

    @register_step("preprocess", mode="reduce-overhead")
    def _preprocess(self, x):
        x.sub_(self.mean).div_(self.std)  # HAZARD: static-address
        return x.clamp(-6.0, 6.0)

    @register_step("encode", mode="reduce-overhead")
    def _encode(self, x):
        return self.encoder(x)

    @register_step("classify", mode="reduce-overhead")
    def _classify(self, emb):
        return self.classifier(emb)

    @register_step("normalize_preview", mode="default")
    def _normalize_preview(self, x):
        x.sub_(self.mean).div_(self.std)  # CLEAN: default torch.compile, no CUDA graphs
        return x

    @torch.no_grad()
    def __call__(self, batch):
        x = self.steps["preprocess"](batch)
        emb = self.steps["encode"](x.clone())  # CLEAN: hand-over cloned before the next compiled step
        probs = self.steps["classify"](emb.clone())  # CLEAN: hand-over cloned
        emb_norm = emb.norm(dim=-1, keepdim=True)  # HAZARD: static-address
        return torch.cat([probs, emb_norm], dim=-1).cpu()

    def preview(self, raw):
        return self.steps["normalize_preview"](raw.cuda()).cpu()


class DynamicBatcher:
    def __init__(self, pipeline, max_batch=32):
        self.pipeline, self.max_batch = pipeline, max_batch
        self.queue = []

    def submit(self, features: torch.Tensor):
        self.queue.append(features)
        if len(self.queue) >= self.max_batch:
            return self.flush()
        return None

    def flush(self):
        if not self.queue:
            return []
        batch = torch.stack(self.queue).cuda(non_blocking=True)
        out = self.pipeline(batch)  # HAZARD: dynamic-shape
        self.queue.clear()
        return list(out.unbind(0))
