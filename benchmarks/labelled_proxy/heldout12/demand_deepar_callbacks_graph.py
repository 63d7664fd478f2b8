"""Store x SKU demand forecasting (DeepAR-style LSTM, negative-binomial output).
The trainer captures its whole step, callbacks included, once and replays it.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

CTX, N_COV, BATCH, PRICE = 90, 6, 2048, 2

class DeepAR(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.lstm = nn.LSTM(1 + N_COV, hidden, num_layers=2, batch_first=True)
        self.mu, self.alpha = nn.Linear(hidden, 1), nn.Linear(hidden, 1)

    def forward(self, x):
        h, _ = self.lstm(x)
        return F.softplus(self.mu(h)).squeeze(-1) + 1e-3, F.softplus(self.alpha(h)).squeeze(-1) + 1e-3

def nb_nll(y, mu, alpha):
    r = 1.0 / alpha
    return -(torch.lgamma(y + r) - torch.lgamma(r) - torch.lgamma(y + 1)
             + r * torch.log(r / (r + mu)) + y * torch.log(mu / (r + mu))).mean()

class Callback:
    def on_step_begin(self, tr): ...
    def on_after_backward(self, tr): ...
    def on_step_end(self, tr, loss): ...

class PriceJitter(Callback):
    def __init__(self, seed=17):
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(seed)

    def on_step_begin(self, tr):
        noise = torch.randn(BATCH, CTX, device="cuda", generator=self.gen)  # HAZARD: rng
        tr.x[..., 1 + PRICE].mul_(1.0 + 0.02 * noise)

class GradNormLogger(Callback):
    history = []

    def on_after_backward(self, tr):
        total = torch.norm(torch.stack([p.grad.norm() for p in tr.model.parameters()]))
        self.history.append(total.item())  # HAZARD: host-sync

class EMAWeights(Callback):
    def __init__(self, model, decay=0.999):
        self.decay, self.shadow = decay, [p.detach().clone() for p in model.parameters()]

    def on_step_end(self, tr, loss):
        for s, p in zip(self.shadow, tr.model.parameters()):
            s.lerp_(p.detach(), 1.0 - self.decay)  # CLEAN: in-place device update, replayed every step

class FleetSnapshot(Callback):
    def __init__(self, model):
        self.stream = torch.cuda.Stream()
        self.buf = torch.zeros(sum(p.numel() for p in model.parameters()), device="cuda")

    def on_step_end(self, tr, loss):
        with torch.cuda.stream(self.stream):  # HAZARD: stream
            self.buf.copy_(torch.cat([p.detach().flatten() for p in tr.model.parameters()]))

class Trainer:
    def __init__(self, model, callbacks):
        self.model, self.callbacks = model.cuda().train(), callbacks
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.x = torch.zeros(BATCH, CTX, 1 + N_COV, device="cuda")
        self.y = torch.zeros(BATCH, CTX, device="cuda")
        self.step_t = torch.zeros((), dtype=torch.long, device="cuda")

    def _step(self):
        self._fire("on_step_begin")
        mu, alpha = self.model(self.x)
        loss = nb_nll(self.y, mu, alpha)
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self._fire("on_after_backward")
        nn.utils.clip_grad_norm_(self.model.parameters(), 10.0)  # CLEAN: no host sync in clip_grad_norm_
        self.opt.step()  # HAZARD: optimizer
        self.step_t.add_(1)  # CLEAN: device-side step counter
        self._fire("on_step_end", loss)
        return loss.detach()

    def _fire(self, hook, *args):
        for cb in self.callbacks:
            getattr(cb, hook)(self, *args)

    def fit(self, batches, epochs=20):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_loss = self._step()
        for _ in range(epochs):
            for x, y in batches:
                self.x.copy_(x)
                self.y.copy_(y)
                g.replay()
        return float(static_loss)

if __name__ == "__main__":
    model = DeepAR().cuda()
    cbs = [PriceJitter(), GradNormLogger(), EMAWeights(model), FleetSnapshot(model)]
    rate = torch.full((BATCH, CTX), 4.0, device="cuda")
    data = [(torch.rand(BATCH, CTX, 1 + N_COV, device="cuda"), torch.poisson(rate)) for _ in range(40)]
    print(Trainer(model, cbs).fit(data))
