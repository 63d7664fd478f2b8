# DANN, MNIST -> MNIST-M (fungtion/DANN layout, torch 0.4). The joint source/target step is now captured
# with torch.cuda.graph; the schedules are still the paper's Python formulas.
import math
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Function

manual_seed = 2018
torch.manual_seed(manual_seed)
torch.cuda.manual_seed(manual_seed)  # CLEAN: seeded once at start-up, outside any capture


class ReverseLayerF(Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.neg() * ctx.alpha, None


class CNNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.feature = nn.Sequential(nn.Conv2d(3, 64, 5), nn.BatchNorm2d(64), nn.MaxPool2d(2), nn.ReLU(True),
                                     nn.Conv2d(64, 50, 5), nn.BatchNorm2d(50), nn.Dropout2d(), nn.MaxPool2d(2), nn.ReLU(True))
        self.class_classifier = nn.Sequential(nn.Linear(800, 100), nn.ReLU(True), nn.Dropout(), nn.Linear(100, 10))
        self.domain_classifier = nn.Sequential(nn.Linear(800, 100), nn.BatchNorm1d(100), nn.ReLU(True), nn.Linear(100, 2))

    def forward(self, x, alpha):
        feature = self.feature(x.expand(x.size(0), 3, 28, 28)).view(-1, 800)  # CLEAN: Dropout2d draws from the default CUDA generator
        reverse_feature = ReverseLayerF.apply(feature, alpha)
        return self.class_classifier(feature), self.domain_classifier(reverse_feature)


class DANNTrainer:
    def __init__(self, n_epoch=100, len_loader=469, batch_size=128, lr=1e-2):
        self.net = CNNModel().cuda()
        self.opt = torch.optim.SGD(self.net.parameters(), lr=lr, momentum=0.9)
        self.n_epoch, self.len_loader, self.bs, self.lr0 = n_epoch, len_loader, batch_size, lr
        self.alpha = 0.0
        self.s_img = torch.zeros(batch_size, 3, 28, 28, device="cuda")
        self.s_label = torch.zeros(batch_size, dtype=torch.long, device="cuda")
        self.t_img = torch.zeros(batch_size, 3, 28, 28, device="cuda")
        self.log = {}

    def step(self):
        alpha = self.alpha  # HAZARD: python-scalar
        self.opt.zero_grad(set_to_none=False)
        class_out, domain_out = self.net(self.s_img, alpha)
        domain_label = torch.zeros(self.bs).long().cuda()  # HAZARD: pinned-memory
        err_s_label = F.cross_entropy(class_out, self.s_label)
        err_s_domain = F.cross_entropy(domain_out, domain_label)
        _, domain_out_t = self.net(self.t_img, alpha)
        err_t_domain = F.cross_entropy(domain_out_t, torch.ones_like(domain_label))
        err = err_t_domain + err_s_domain + err_s_label
        err.backward()
        self.opt.step()  # CLEAN: SGD with momentum keeps no host-side state
        self.log["err_s_label"] = err_s_label.data.cpu().numpy()  # HAZARD: host-sync
        self.err, self.class_out = err, class_out

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

    def fit(self, source_loader, target_loader):
        self.capture()
        for epoch in range(self.n_epoch):
            for i, ((s_img, s_label), (t_img, _)) in enumerate(zip(source_loader, target_loader)):
                p = float(i + epoch * self.len_loader) / self.n_epoch / self.len_loader
                self.alpha = 2.0 / (1.0 + np.exp(-10 * p)) - 1
                for g in self.opt.param_groups:
                    g["lr"] = self.lr0 / (1.0 + 10 * p) ** 0.75  # HAZARD: optimizer
                self.s_img.copy_(s_img)  # CLEAN: copy_ into the static source batch
                self.s_label.copy_(s_label)
                self.t_img.copy_(t_img)
                self.graph.replay()
            acc = self.class_out.argmax(1).eq(self.s_label).float().mean().item()  # CLEAN: after replay, outside the capture
            print("epoch %d err %.4f src acc %.3f (%.2f)" % (epoch, self.err.item(), acc, math.exp(-epoch)))
