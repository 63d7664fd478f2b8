"""First-order DARTS on CIFAR-10 with GDAS-style Gumbel sampling of the edge ops (lab prototype).
The search step (weight update on a train batch + architecture update on a held-out batch) is
captured once as a CUDA graph by `SearchTrainer`; callbacks fire inside the step."""
import time
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
import torchvision.transforms as T

OPS = {
    "skip": lambda c: nn.Identity(),
    "conv3": lambda c: nn.Sequential(nn.ReLU(), nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c, affine=False)),
    "conv5": lambda c: nn.Sequential(nn.ReLU(), nn.Conv2d(c, c, 5, padding=2, bias=False), nn.BatchNorm2d(c, affine=False)),
    "avg": lambda c: nn.AvgPool2d(3, 1, 1),
    "max": lambda c: nn.MaxPool2d(3, 1, 1),
}

class Network(nn.Module):
    def __init__(self, c=16, n_edges=8, n_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c))
        self.edges = nn.ModuleList([nn.ModuleList([f(c) for f in OPS.values()]) for _ in range(n_edges)])
        self.head = nn.Linear(c, n_classes)
        self.alpha = nn.Parameter(1e-3 * torch.randn(n_edges, len(OPS)))
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(0)
        self.tau = 10.0

    def arch_weights(self):
        u = torch.rand(self.alpha.shape, device=self.alpha.device, generator=self.gen)  # HAZARD: rng
        return F.softmax((self.alpha - torch.log(-torch.log(u + 1e-9) + 1e-9)) / self.tau, dim=-1)

    def forward(self, x):
        w, h = self.arch_weights(), self.stem(x)
        for i, ops in enumerate(self.edges):
            h = h + sum(wi * op(h) for wi, op in zip(w[i], ops))
        return self.head(h.mean((2, 3)))

class LossPrinter:
    hist = []
    def on_step_end(self, trainer, loss):
        self.hist.append(loss.item())  # HAZARD: host-sync

class Timer:
    def on_step_end(self, trainer, loss):
        trainer.last_step_t = time.perf_counter()  # HAZARD: host-code

class AlphaSnapshot:
    def __init__(self, shape):
        self.stream, self.buf = torch.cuda.Stream(), torch.zeros(shape, device="cuda")
    def on_step_end(self, trainer, loss):
        with torch.cuda.stream(self.stream):  # HAZARD: stream
            self.buf.copy_(trainer.model.alpha.detach())

class StepCounter:
    def __init__(self):
        self.steps = torch.zeros((), device="cuda")
    def on_step_end(self, trainer, loss):
        self.steps.add_(1)  # CLEAN: device-side counter, advanced by every replay

class SearchTrainer:
    def __init__(self, model, callbacks, batch=64):
        self.model, self.callbacks = model.cuda(), callbacks
        self.w_params = [p for n, p in self.model.named_parameters() if n != "alpha"]
        self.w_opt = torch.optim.SGD(self.w_params, lr=0.025, momentum=0.9, weight_decay=3e-4)  # CLEAN: SGD step in the graph, momentum buffers created during warm-up
        self.a_opt = torch.optim.Adam([self.model.alpha], lr=3e-4, betas=(0.5, 0.999), weight_decay=1e-3)
        self.xt, self.yt = torch.zeros(batch, 3, 32, 32, device="cuda"), torch.zeros(batch, dtype=torch.long, device="cuda")
        self.xv, self.yv, self.graph = torch.zeros_like(self.xt), torch.zeros_like(self.yt), None

    def _step(self):
        self.w_opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(self.xt), self.yt)
        loss.backward()
        nn.utils.clip_grad_norm_(self.w_params, 5.0)  # CLEAN: clip_grad_norm_ stays on the device
        self.w_opt.step()
        self.a_opt.zero_grad(set_to_none=True)
        F.cross_entropy(self.model(self.xv), self.yv).backward()
        self.a_opt.step()  # HAZARD: optimizer
        for cb in self.callbacks:
            cb.on_step_end(self, loss.detach())

    def _capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._step()

    def fit(self, train_loader, val_loader, epochs=50):
        for epoch in range(epochs):
            for (xt, yt), (xv, yv) in zip(train_loader, val_loader):
                for dst, src in ((self.xt, xt), (self.yt, yt), (self.xv, xv), (self.yv, yv)):
                    dst.copy_(src, non_blocking=True)
                if self.graph is None:
                    self._capture()
                self.graph.replay()
            print(f"epoch {epoch}: genotype {[list(OPS)[i] for i in self.model.alpha.argmax(-1).tolist()]}")  # CLEAN: host read between replays

if __name__ == "__main__":
    tf = T.Compose([T.RandomCrop(32, 4), T.RandomHorizontalFlip(), T.ToTensor()])
    tr, va = torch.utils.data.random_split(torchvision.datasets.CIFAR10("data", train=True, download=True, transform=tf), [25000, 25000])
    kw = dict(batch_size=64, shuffle=True, drop_last=True, pin_memory=True, num_workers=4)
    net = Network()
    cbs = [LossPrinter(), Timer(), AlphaSnapshot(net.alpha.shape), StepCounter()]
    SearchTrainer(net, cbs).fit(torch.utils.data.DataLoader(tr, **kw), torch.utils.data.DataLoader(va, **kw))
