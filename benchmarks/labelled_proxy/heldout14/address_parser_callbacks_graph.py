"""Character-level address parser for a parcel carrier (house number, street, unit, city, postcode).
The trainer captures its whole step into a CUDA graph; callbacks (augmentation, timing,
loss history, EMA) hook into the step and therefore run inside the capture."""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

LABELS = ("O", "house", "street", "unit", "city", "region", "postcode")


class AddressTagger(nn.Module):
    def __init__(self, n_chars=256, d=128):
        super().__init__()
        self.emb = nn.Embedding(n_chars, 64)
        self.lstm = nn.LSTM(64, d, num_layers=2, bidirectional=True, batch_first=True)
        self.out = nn.Linear(2 * d, len(LABELS))
    def forward(self, chars):
        h, _ = self.lstm(self.emb(chars))
        return self.out(h)


class Callback:
    def on_step_begin(self, trainer): pass
    def on_loss(self, trainer, loss): pass
    def on_step_end(self, trainer): pass


class TypoAugment(Callback):
    def __init__(self, p=0.03, seed=11):
        self.p, self.gen = p, torch.Generator(device="cuda")
        self.gen.manual_seed(seed)
    def on_step_begin(self, trainer):
        c = trainer.inp
        noise = torch.randint(32, 127, c.shape, generator=self.gen, device=c.device)  # HAZARD: rng
        flip = torch.rand(c.shape, device=c.device) < self.p  # CLEAN: default CUDA generator
        c.copy_(torch.where(flip & (c > 0), noise, c))


class StepTimer(Callback):
    def on_step_begin(self, trainer):
        trainer.step_started = time.perf_counter()  # HAZARD: host-code


class LossHistory(Callback):
    def __init__(self): self.history = []
    def on_loss(self, trainer, loss):
        self.history.append(loss.item())  # HAZARD: host-sync


class EMA(Callback):
    def __init__(self, model, decay=0.999):
        self.shadow, self.decay = [p.detach().clone() for p in model.parameters()], decay
    def on_step_end(self, trainer):
        for s, p in zip(self.shadow, trainer.model.parameters()):
            s.lerp_(p.detach(), 1 - self.decay)  # CLEAN: in-place lerp_ on persistent buffers


class CapturedTrainer:
    def __init__(self, model, callbacks, batch=256, max_len=96, device="cuda"):
        self.model = model.to(device)
        self.callbacks = callbacks
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=2e-3, weight_decay=0.01)
        self.chars = torch.zeros(batch, max_len, dtype=torch.long, device=device)
        self.inp = torch.zeros_like(self.chars)
        self.tags = torch.zeros(batch, max_len, dtype=torch.long, device=device)
        self.steps = torch.zeros((), device=device)
        self.graph = None

    def _fire(self, hook, *args):
        for cb in self.callbacks:
            getattr(cb, hook)(self, *args)

    def _step(self):
        self.inp.copy_(self.chars)
        self._fire("on_step_begin")
        logits = self.model(self.inp)
        loss = F.cross_entropy(logits.flatten(0, 1), self.tags.flatten(), ignore_index=-100)
        self._fire("on_loss", loss)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)  # CLEAN: clip_grad_norm_ stays on the device
        self.opt.step()  # HAZARD: optimizer
        self.steps.add_(1)  # CLEAN: device-side step counter
        self._fire("on_step_end")
        return loss.detach()

    def fit(self, loader, warmup=3):
        for chars, tags in loader:
            self.chars.copy_(chars)
            self.tags.copy_(tags)
            if self.graph is None:
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(warmup):
                        self.opt.zero_grad(set_to_none=True)
                        self._step()
                torch.cuda.current_stream().wait_stream(s)
                self.graph = torch.cuda.CUDAGraph()
                self.opt.zero_grad(set_to_none=True)
                with torch.cuda.graph(self.graph):
                    self.loss = self._step()
            self.graph.replay()
            print(f"step time {time.perf_counter() - getattr(self, 'step_started', 0.0):.4f}s")


if __name__ == "__main__":
    model = AddressTagger().cuda()
    CapturedTrainer(model, [TypoAugment(), StepTimer(), LossHistory(), EMA(model)]).fit(torch.load("address_batches.pt"))
