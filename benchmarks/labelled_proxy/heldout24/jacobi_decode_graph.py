"""Jacobi (fixed-point) parallel decoding for a small code-completion model.

A block of guessed tokens is refined in parallel until it stops changing.  The inner
refinement iterations are captured into one CUDA graph over a fixed sliding window;
the host loop replays it and commits the converged prefix.
"""
import torch
import torch.nn as nn


class JacobiDecoder:
    def __init__(self, model: nn.Module, vocab: int, window: int = 512, block: int = 16, seed: int = 0):
        self.model = model.eval()
        self.vocab = vocab
        self.window = torch.zeros(1, window, dtype=torch.long, device="cuda")
        self.guess = torch.zeros(1, block, dtype=torch.long, device="cuda")
        self.n_fixed = torch.zeros((), dtype=torch.long, device="cuda")
        self.arange = torch.arange(block, device="cuda")
        self.init_gen = torch.Generator(device="cuda")
        self.init_gen.manual_seed(seed)
        self.inner_iters = 4
        self.graph = None

    def _refine_once(self):
        seq = torch.cat([self.window, self.guess], dim=1)
        logits = self.model(seq)[:, -self.guess.shape[1] - 1:-1]
        new = logits.argmax(dim=-1)
        same = (new == self.guess).long()
        prefix_ok = torch.cumprod(same, dim=1).sum(dim=1).squeeze(0)
        self.n_fixed.copy_(prefix_ok)  # CLEAN: device-side counter
        keep = self.arange < prefix_ok
        self.guess.copy_(torch.where(keep, self.guess, new))  # CLEAN: device select, no sync
        return new

    def _step(self):
        noise = torch.randint(0, self.vocab, self.guess.shape, device="cuda", generator=self.init_gen)  # HAZARD: rng
        self.guess.copy_(torch.where(self.guess == 0, noise, self.guess))
        for _ in range(self.inner_iters):  # HAZARD: python-scalar
            new = self._refine_once()
            if (new == self.guess).all():  # HAZARD: dynamic-control-flow
                break
        self.accepted = int(self.n_fixed)  # HAZARD: host-sync
        return self.guess

    @torch.no_grad()
    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                self._refine_once()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
            self.out = self._step()

    @torch.no_grad()
    def generate(self, prompt_ids: torch.Tensor, max_new: int = 256):
        ctx = prompt_ids[-self.window.shape[1]:]
        self.window.zero_()
        self.window[0, -ctx.numel():].copy_(ctx)  # CLEAN: copy into the static window
        produced = []
        while len(produced) < max_new:
            self.guess.zero_()
            self.graph.replay()
            n = max(1, int(self.n_fixed.item()))  # CLEAN: host read after replay
            accepted = self.guess[0, :n]
            produced.extend(accepted.tolist())  # CLEAN: outside the graph
            self.window.copy_(torch.cat([self.window[:, n:], accepted[None]], dim=1))
        return produced[:max_new]

    def tune(self, mean_accept: float):
        if mean_accept > 0.8 * self.guess.shape[1]:
            self.inner_iters = max(2, self.inner_iters - 1)
        else:
            self.inner_iters = min(8, self.inner_iters + 1)
