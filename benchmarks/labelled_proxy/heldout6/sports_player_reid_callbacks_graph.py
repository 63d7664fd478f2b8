"""Player re-identification embeddings for multi-object tracking in broadcast football.

CNN + BNNeck trained on PK batches (16 identities x 4 crops) with batch-hard triplet and
ID losses. The whole step is captured once; trainer callbacks fire inside the capture.
"""
import time
import torch
import torch.nn as nn
import torch.nn.functional as F

P, K, EMB, N_IDS = 16, 4, 256, 1200


class ReIDNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 64, 3, 2, 1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 128, 3, 2, 1), nn.BatchNorm2d(128), nn.ReLU(),
            nn.Conv2d(128, EMB, 3, 2, 1), nn.BatchNorm2d(EMB), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.neck, self.classifier = nn.BatchNorm1d(EMB), nn.Linear(EMB, N_IDS, bias=False)

    def forward(self, x):
        f = self.backbone(x)
        return f, self.classifier(self.neck(f))


class EMACallback:
    def __init__(self, model, decay=0.999):
        self.decay, self.ema = decay, [p.detach().clone() for p in model.parameters()]

    def on_step_end(self, trainer, loss):
        torch._foreach_lerp_(self.ema, [p.detach() for p in trainer.model.parameters()], 1 - self.decay)  # CLEAN: device-side EMA, replayed with the graph


class ConsoleLogger:
    def __init__(self):
        self.losses, self.stamps = [], []

    def on_step_end(self, trainer, loss):
        self.losses.append(loss.item())  # HAZARD: host-sync
        self.stamps.append(time.time())  # HAZARD: host-code


class EmbeddingDump:  # streams batch embeddings to the projector dashboard
    def __init__(self):
        self.stream = torch.cuda.Stream()
        self.host = torch.empty(P * K, EMB).pin_memory()

    def on_step_end(self, trainer, loss):
        with torch.cuda.stream(self.stream):  # HAZARD: stream
            self.host.copy_(trainer.last_emb, non_blocking=True)


class ReIDTrainer:
    def __init__(self, model, callbacks):
        self.model, self.callbacks = model.cuda().train(), callbacks
        self.opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
        self.margin = 0.3  # updated by a margin schedule between epochs
        self.images = torch.zeros(P * K, 3, 256, 128, device="cuda")
        self.labels = torch.zeros(P * K, dtype=torch.long, device="cuda")
        self.step_t = torch.zeros((), device="cuda")
        self.graph = torch.cuda.CUDAGraph()

    def _step(self):
        feats, logits = self.model(self.images)
        self.last_emb = feats.detach()
        dist = torch.cdist(feats, feats)
        same = self.labels[:, None] == self.labels[None]
        hardest_pos = (dist * same).amax(1)
        hardest_neg = dist.masked_fill(same, float("inf")).amin(1)  # CLEAN: masked_fill keeps shapes static
        margin = self.margin  # HAZARD: python-scalar
        triplet = F.relu(hardest_pos - hardest_neg + margin).mean()
        loss = triplet + F.cross_entropy(logits, self.labels, label_smoothing=0.1)
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()  # CLEAN: SGD keeps no host-side state
        self.step_t += 1  # CLEAN: device-side step counter
        for cb in self.callbacks:
            cb.on_step_end(self, loss.detach())
        return loss.detach()

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.static_loss = self._step()

    def fit(self, loader, epochs):  # loader yields PK batches already on the GPU
        self.capture()
        for ep in range(epochs):
            for imgs, ids in loader():
                self.images.copy_(imgs)
                self.labels.copy_(ids)
                self.graph.replay()
            self.margin = 0.3 + 0.02 * ep
