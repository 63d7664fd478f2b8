# Holistically-nested edge detection (HED) on BSDS500, from a 2017 PyTorch port (BGR mean subtraction,
# class-balanced BCE on five side outputs). Training compiles the loss with backend="cudagraphs";
# the edge service captures the eager network with capture_begin/capture_end.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN_BGR = np.array([104.00699, 116.66877, 122.67892], dtype=np.float32)


class HED(nn.Module):
    def __init__(self):
        super().__init__()
        cfg = [(3, 64, 2), (64, 128, 2), (128, 256, 3), (256, 512, 3), (512, 512, 3)]
        self.stages = nn.ModuleList([nn.Sequential(*[m for j in range(n) for m in (nn.Conv2d(cin if j == 0 else cout, cout, 3, padding=1), nn.ReLU(True))])
                                     for cin, cout, n in cfg])
        self.side = nn.ModuleList([nn.Conv2d(c, 1, 1) for _, c, _ in cfg])
        self.fuse = nn.Conv2d(5, 1, 1)

    def forward(self, x):
        H, W = x.shape[-2:]
        sides = []
        for i, (stage, side) in enumerate(zip(self.stages, self.side)):
            x = stage(x if i == 0 else F.max_pool2d(x, 2, ceil_mode=True))
            sides.append(F.interpolate(side(x), size=(H, W), mode="bilinear", align_corners=False))
        return sides + [self.fuse(torch.cat(sides, 1))]


side_weight = 1.0


@torch.compile(backend="cudagraphs")
def balanced_bce(outputs, label):
    pos = (label > 0.5).float()
    neg = (label == 0).float()
    beta = neg.sum() / (pos.sum() + neg.sum())
    w = torch.where(label > 0.5, beta, 1 - beta) * (pos + neg)  # CLEAN: weights from device tensors, no host read
    losses = [F.binary_cross_entropy_with_logits(o, pos, weight=w, reduction="sum") for o in outputs]
    return side_weight * sum(losses[:-1]) + losses[-1]  # HAZARD: python-scalar


class EdgeService:
    def __init__(self, model, h=321, w=481):
        self.model = model.cuda().eval()
        self.img = torch.zeros(1, 3, h, w, device="cuda")
        self.tta_gen = torch.Generator(device="cuda")
        self.graph = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.no_grad():
            for _ in range(3):
                self._run()
        torch.cuda.current_stream().wait_stream(s)
        with torch.no_grad():
            self.graph.capture_begin()  # HAZARD: stream
            self.out = self._run()
            self.graph.capture_end()

    def _run(self):
        mean = torch.from_numpy(MEAN_BGR).cuda().view(1, 3, 1, 1)  # HAZARD: pinned-memory
        x = self.img.flip(1) * 255.0 - mean  # CLEAN: RGB to BGR by flip, no Python-list index
        with torch.random.fork_rng(devices=[torch.cuda.current_device()]):  # CLEAN: fork_rng saves and restores the same state
            jitter = 1.0 + 0.02 * torch.randn(1, device="cuda")
        shift = torch.rand(2, device="cuda", generator=self.tta_gen)  # HAZARD: rng
        edges = torch.sigmoid(self.model(x * jitter)[-1])
        edges = 0.5 * (edges + torch.roll(edges, 1, dims=-1) * shift[0] / (shift[0] + 1e-6))
        torch.cuda.empty_cache()  # HAZARD: memory
        return edges

    def __call__(self, img):
        self.img.copy_(img)  # CLEAN: copy_ into the static image
        self.graph.replay()
        return self.out.clone()  # CLEAN: cloned after replay


def train(model, loader, epochs=10):
    global side_weight
    opt = torch.optim.SGD(model.parameters(), lr=1e-6, momentum=0.9, weight_decay=2e-4)
    for epoch in range(epochs):
        side_weight = max(0.2, 1.0 - 0.1 * epoch)
        for img, label in loader:
            loss = balanced_bce(model(img.cuda()), label.cuda())
            opt.zero_grad()
            loss.backward()
            opt.step()
        print("epoch %d loss %.2f" % (epoch, loss.item()))
