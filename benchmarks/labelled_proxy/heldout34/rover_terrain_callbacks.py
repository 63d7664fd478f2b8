"""Planetary-rover terrain classifier; the captured training step fires a list of callback objects."""
import torch
import torch.nn as nn
import torch.nn.functional as F

class Callback:
    def on_batch(self, trainer, logits, labels):
        pass

class DeviceAccuracy(Callback):
    def __init__(self):
        self.correct = torch.zeros((), device="cuda")
    def on_batch(self, trainer, logits, labels):
        self.correct += (logits.argmax(-1) == labels).sum()  # CLEAN: device accumulator, replayed

class SlipAlarm(Callback):
    def on_batch(self, trainer, logits, labels):
        p_sand = logits.softmax(-1)[:, 2].mean().item()  # HAZARD: host-sync
        trainer.alarm = p_sand > 0.6

class MirrorToCpu(Callback):
    def __init__(self):
        self.stream = torch.cuda.Stream()
    def on_batch(self, trainer, logits, labels):
        with torch.cuda.stream(self.stream):  # HAZARD: stream
            trainer.mirror = logits.detach().to(torch.float16)

class Curriculum:
    def __init__(self):
        self.smoothing = 0.0
    def target(self, labels, n_cls):
        eps = self.smoothing  # HAZARD: python-scalar
        return F.one_hot(labels, n_cls).float() * (1 - eps) + eps / n_cls

class PatchMix:
    def __init__(self, seed=5):
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(seed)
    def __call__(self, img):
        lam = torch.rand(img.shape[0], 1, 1, 1, device=img.device, generator=self.gen)  # HAZARD: rng
        return lam * img + (1 - lam) * img.flip(0)

class TerrainNet(nn.Module):
    def __init__(self, n_cls=6):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(4, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU(),
                               nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, n_cls))
    def forward(self, x):
        return self.f(x)

class GraphTrainer:
    def __init__(self, net, callbacks, curriculum, mix, batch=64, n_cls=6):
        self.net, self.callbacks, self.curriculum, self.mix = net.cuda(), callbacks, curriculum, mix
        self.n_cls = n_cls
        self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-3, capturable=True)  # CLEAN: capturable Adam
        self.img = torch.zeros(batch, 4, 64, 64, device="cuda")
        self.lbl = torch.zeros(batch, dtype=torch.long, device="cuda")
    def _step(self):
        self.opt.zero_grad(set_to_none=True)
        logits = self.net(self.mix(self.img))
        loss = torch.sum(-self.curriculum.target(self.lbl, self.n_cls) * logits.log_softmax(-1), -1).mean()
        loss.backward()
        self.opt.step()
        for cb in self.callbacks:
            cb.on_batch(self, logits, self.lbl)
        self.loss = loss.detach()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        self.g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.g):  # CLEAN: warm-up done on a forked side stream
            self._step()
    def fit_batch(self, img, lbl):
        self.img.copy_(img)  # CLEAN: copy_ into static inputs
        self.lbl.copy_(lbl)
        self.g.replay()

def train(loader, epochs=10):
    acc, cur = DeviceAccuracy(), Curriculum()
    tr = GraphTrainer(TerrainNet(), [acc, SlipAlarm(), MirrorToCpu()], cur, PatchMix())
    tr.capture()
    for epoch in range(epochs):
        cur.smoothing = min(0.1, 0.02 * epoch)
        for img, lbl in loader:
            tr.fit_batch(img.cuda(), lbl.cuda())
        print(epoch, acc.correct.item())  # CLEAN: host read after the epoch's replays
