"""Graves-style handwriting synthesis: attention-window LSTM + mixture density output.

One sampling step (pen offsets and pen-up bit) is captured once and replayed for every point.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class HandwritingSynth(nn.Module):
    def __init__(self, n_chars=80, hidden=400, K=10, M=20):
        super().__init__()
        self.char_emb = nn.Embedding(n_chars, 64)
        self.lstm1 = nn.LSTMCell(3 + 64, hidden)
        self.window = nn.Linear(hidden, 3 * K)
        self.lstm2 = nn.LSTMCell(3 + 64 + hidden, hidden)
        self.mdn = nn.Linear(hidden, 1 + 6 * M)
        self.K, self.M = K, M

    def step(self, x, text, h1, c1, h2, c2, kappa, w, bias):
        h1, c1 = self.lstm1(torch.cat([x, w], -1), (h1, c1))
        a, b, k = self.window(h1).exp().chunk(3, -1)
        kappa = kappa + k / 25.0
        u = torch.arange(text.shape[1], device=x.device, dtype=x.dtype)
        phi = (a[..., None] * torch.exp(-b[..., None] * (kappa[..., None] - u) ** 2)).sum(1)
        w = (phi[..., None] * self.char_emb(text)).sum(1)
        h2, c2 = self.lstm2(torch.cat([x, w, h1], -1), (h2, c2))
        p = self.mdn(h2)
        pi, mu, log_sd, rho = p[:, 1:].split([self.M, 2 * self.M, 2 * self.M, self.M], -1)
        return (torch.sigmoid(p[:, :1]), F.softmax(pi * (1 + bias), -1), mu, torch.exp(log_sd - bias),
                torch.tanh(rho), (h1, c1, h2, c2, kappa, w))


class GraphedSampler:
    def __init__(self, model, text_len=64, hidden=400, style_seed=1234):
        self.model = model.cuda().eval()
        z = lambda *s: torch.zeros(*s, device="cuda")
        self.x, self.text = z(1, 3), torch.zeros(1, text_len, dtype=torch.long, device="cuda")
        self.state = [z(1, hidden), z(1, hidden), z(1, hidden), z(1, hidden), z(1, model.K), z(1, 64)]
        self.bias = 0.5  # "legibility" knob exposed in the UI
        self.style_seed = style_seed
        self.pen_gen = torch.Generator(device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    @torch.no_grad()
    def _sample_step(self):
        torch.manual_seed(self.style_seed)  # HAZARD: rng
        bias = self.bias  # HAZARD: python-scalar
        eos, pi, mu, sd, rho, new_state = self.model.step(self.x, self.text, *self.state, bias)
        comp = torch.multinomial(pi, 1)  # CLEAN: multinomial on the default CUDA generator is capturable
        pick = comp[..., None].expand(-1, -1, 2)
        m = mu.view(1, self.model.M, 2).gather(1, pick).squeeze(1)
        s = sd.view(1, self.model.M, 2).gather(1, pick).squeeze(1)
        r = rho.gather(1, comp)
        z = torch.randn(1, 2, device=m.device)
        dx = m[:, :1] + s[:, :1] * z[:, :1]
        dy = m[:, 1:] + s[:, 1:] * (r * z[:, :1] + torch.sqrt(1 - r ** 2) * z[:, 1:])
        with torch.random.fork_rng(devices=[torch.cuda.current_device()]):  # CLEAN: fork_rng reads and restores the same state, allowed in capture
            wobble = torch.rand(1, 2, device=m.device) * 0.01
        pen = torch.bernoulli(eos, generator=self.pen_gen)  # HAZARD: rng
        self.x.copy_(torch.cat([dx + wobble[:, :1], dy + wobble[:, 1:], pen], -1))  # CLEAN: next input written into the static buffer in place
        for dst, src in zip(self.state, new_state):
            dst.copy_(src)

    def reset(self):
        self.x.zero_()
        for t in self.state:
            t.zero_()

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.model.step(self.x, self.text, *self.state, self.bias)
        torch.cuda.current_stream().wait_stream(s)
        self.reset()
        with torch.cuda.graph(self.graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
            self._sample_step()
            torch.cuda.empty_cache()  # HAZARD: memory

    @torch.no_grad()
    def sample(self, text_ids, max_points=700):
        self.reset()
        self.text.copy_(text_ids)
        pts = []
        for _ in range(max_points):
            self.graph.replay()
            pts.append(self.x.clone())
        return torch.cat(pts).cpu()  # CLEAN: device-to-host copy after all replays


if __name__ == "__main__":
    torch.manual_seed(0)
    sampler = GraphedSampler(HandwritingSynth())
    sampler.capture()
    sampler.bias = 2.0
    print(sampler.sample(torch.randint(1, 80, (1, 64), device="cuda")).shape)
