# mixup on CIFAR-10 with PreAct ResNet-18 (facebookresearch/mixup-cifar10, 2017). A small trainer now
# captures the whole step and fires the old progress-bar/metric callbacks from inside it.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


def mixup_data(x, y, alpha=1.0, use_cuda=True, device_perm=False):
    lam = np.random.beta(alpha, alpha) if alpha > 0 else 1.0  # HAZARD: host-code
    batch_size = x.size(0)
    if device_perm:
        index = torch.randperm(batch_size, device=x.device)  # CLEAN: randperm on the CUDA default generator
    else:
        index = torch.randperm(batch_size).cuda()  # HAZARD: pinned-memory
    mixed_x = lam * x + (1 - lam) * x[index, :]
    return mixed_x, y, y[index], lam


class ProgressCallback:
    def __init__(self):
        self.train_loss, self.steps = 0.0, 0

    def on_step_end(self, trainer, loss, outputs, targets_a, targets_b, lam):
        self.train_loss += loss.item()  # HAZARD: host-sync
        self.steps += 1


class DeviceAccuracyCallback:
    def __init__(self):
        self.correct = torch.zeros((), device="cuda")

    def on_step_end(self, trainer, loss, outputs, targets_a, targets_b, lam):
        pred = outputs.argmax(1)
        hit = lam * pred.eq(targets_a).sum() + (1 - lam) * pred.eq(targets_b).sum()
        self.correct.add_(hit)  # CLEAN: accumulated on the device, no host read


class MixupTrainer:
    def __init__(self, net, callbacks, lr=0.1, alpha=1.0, batch=128):
        self.net, self.callbacks, self.alpha, self.base_lr = net.cuda(), callbacks, alpha, lr
        self.opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
        self.x = torch.zeros(batch, 3, 32, 32, device="cuda")
        self.y = torch.zeros(batch, dtype=torch.long, device="cuda")

    def step(self):
        inputs, targets_a, targets_b, lam = mixup_data(self.x, self.y, self.alpha)
        inputs, targets_a, targets_b = map(Variable, (inputs, targets_a, targets_b))
        outputs = self.net(inputs)
        loss = lam * F.cross_entropy(outputs, targets_a) + (1 - lam) * F.cross_entropy(outputs, targets_b)
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()  # CLEAN: SGD keeps no host-side step state
        for cb in self.callbacks:
            cb.on_step_end(self, loss, outputs, targets_a, targets_b, lam)

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.step()

    def adjust_learning_rate(self, epoch):
        lr = self.base_lr * (0.1 ** (int(epoch >= 100) + int(epoch >= 150)))
        for param_group in self.opt.param_groups:
            param_group["lr"] = lr  # HAZARD: optimizer

    def fit(self, trainloader, epochs=200):
        self.capture()
        for epoch in range(epochs):
            self.adjust_learning_rate(epoch)
            for inputs, targets in trainloader:
                if inputs.size(0) != self.x.size(0):
                    continue
                self.x.copy_(inputs, non_blocking=True)  # CLEAN: copy_ into the static input between replays
                self.y.copy_(targets, non_blocking=True)
                self.graph.replay()
            acc = [cb.correct.item() for cb in self.callbacks if hasattr(cb, "correct")]
            print("epoch %d acc-sum %s" % (epoch, acc))  # CLEAN: host reads after the replays, outside the capture
