"""Selective activation recompute with dropout-exact replays, inside a captured train step.

`RecomputeDropoutMLP` saves only its input and regenerates the dropout mask in
backward from a saved generator state.  The full step (fwd, bwd, SGD) of the
sequence-tagging model is captured into one CUDA graph.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class RecomputeDropoutMLP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w1, w2, p, gen):
        ctx.gen_state = gen.clone_state()  # HAZARD: rng
        h = F.gelu(x @ w1.t())
        mask = (torch.rand(h.shape, device=h.device, generator=gen) > p).to(h.dtype)
        ctx.save_for_backward(x, w1, w2)
        ctx.p, ctx.gen = p, gen
        return (h * mask / (1 - p)) @ w2.t()

    @staticmethod
    def backward(ctx, gout):
        x, w1, w2 = ctx.saved_tensors
        gen = ctx.gen
        with torch.enable_grad():
            xd = x.detach().requires_grad_()
            w1d, w2d = w1.detach().requires_grad_(), w2.detach().requires_grad_()
            h = F.gelu(xd @ w1d.t())
            gen.graphsafe_set_state(ctx.gen_state)
            mask = (torch.rand(h.shape, device=h.device, generator=gen) > ctx.p).to(h.dtype)
            out = (h * mask / (1 - ctx.p)) @ w2d.t()
        gx, g1, g2 = torch.autograd.grad(out, (xd, w1d, w2d), gout)
        return gx, g1, g2, None, None


class Tagger(nn.Module):
    def __init__(self, vocab=30000, d=768, hidden=3072, n_tags=41, layers=6, p=0.1):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.w1 = nn.ParameterList(nn.Parameter(torch.randn(hidden, d) * 0.02) for _ in range(layers))
        self.w2 = nn.ParameterList(nn.Parameter(torch.randn(d, hidden) * 0.02) for _ in range(layers))
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        self.out = nn.Linear(d, n_tags)
        self.p = p
        self.gen = torch.Generator(device="cuda")

    def forward(self, ids):
        h = F.dropout(self.emb(ids), 0.1, self.training)  # CLEAN: default CUDA generator is captured
        for w1, w2, n in zip(self.w1, self.w2, self.norms):
            h = h + RecomputeDropoutMLP.apply(n(h), w1, w2, self.p, self.gen)
        return self.out(h)


class CapturedStep:
    def __init__(self, model: Tagger, batch=32, seq=256, seed=1234):
        self.model = model.cuda().train()
        self.opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        self.ids = torch.zeros(batch, seq, dtype=torch.long, device="cuda")
        self.tags = torch.zeros(batch, seq, dtype=torch.long, device="cuda")
        self.seed = seed
        self.step_no = 0
        self.graph = torch.cuda.CUDAGraph()

    def _body(self):
        torch.cuda.manual_seed(self.seed + self.step_no)  # HAZARD: rng
        with torch.random.fork_rng(devices=[self.ids.device]):  # CLEAN: same state read and restored
            noise = torch.randint_like(self.ids, 0, 100) < 5
        ids = torch.where(noise, torch.zeros_like(self.ids), self.ids)  # CLEAN: device-side token masking
        loss = F.cross_entropy(self.model(ids).flatten(0, 1), self.tags.flatten(), ignore_index=-100)
        loss.backward()
        self.opt.step()  # CLEAN: SGD keeps no host-side step state
        self.opt.zero_grad(set_to_none=False)
        self.step_no += 1  # HAZARD: host-code
        return loss.detach()

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._body()
        torch.cuda.current_stream().wait_stream(s)
        self.graph.register_generator_state(self.model.gen)
        with torch.cuda.graph(self.graph):
            self.loss = self._body()

    def __call__(self, ids, tags):
        self.ids.copy_(ids)
        self.tags.copy_(tags)
        self.graph.replay()
        return self.loss

    def decay(self, factor=0.5):
        for g in self.opt.param_groups:
            g["lr"] *= factor  # HAZARD: optimizer
