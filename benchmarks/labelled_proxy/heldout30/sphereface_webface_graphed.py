# SphereFace (A-Softmax, m=4) on CASIA-WebFace, after clcarwin/sphereface_pytorch (2017). Backbone
# and AngleLinear head are graphed together with torch.cuda.make_graphed_callables.
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class AngleLinear(nn.Module):
    def __init__(self, in_features, out_features, m=4):
        super().__init__()
        self.weight = nn.Parameter(torch.Tensor(in_features, out_features).uniform_(-1, 1).renorm_(2, 1, 1e-5).mul_(1e5))
        self.m, self.it = m, 0
        self.LambdaMin, self.base, self.gamma, self.power = 5.0, 1000.0, 0.12, 1
        self.mlambda = [lambda x: x ** 0, lambda x: x ** 1, lambda x: 2 * x ** 2 - 1, lambda x: 4 * x ** 3 - 3 * x,
                        lambda x: 8 * x ** 4 - 8 * x ** 2 + 1]

    def forward(self, x, target):
        self.it += 1  # HAZARD: host-code
        lamb = max(self.LambdaMin, self.base * (1 + self.gamma * self.it) ** (-self.power))
        w = self.weight.renorm(2, 1, 1e-5).mul(1e5)
        xlen = x.pow(2).sum(1).pow(0.5)
        cos_theta = (x.mm(w) / xlen.view(-1, 1) / w.pow(2).sum(0).pow(0.5).view(1, -1)).clamp(-1, 1)
        assert not torch.isnan(cos_theta).any()  # HAZARD: host-sync
        cos_m_theta = self.mlambda[self.m](cos_theta)  # CLEAN: Python list of polynomials picked by a fixed int, no tensor indexing
        k = (self.m * cos_theta.acos() / math.pi).floor()
        phi = ((-1.0) ** k) * cos_m_theta - 2 * k
        one_hot = torch.zeros_like(cos_theta).scatter_(1, target.view(-1, 1), 1.0)  # CLEAN: scatter_ with CUDA indices
        out = cos_theta * xlen.view(-1, 1)
        out = out + one_hot * (phi - cos_theta) * xlen.view(-1, 1) / (1 + lamb)
        return F.cross_entropy(out, target)


class Sphere20(nn.Module):
    def __init__(self, feat=512):
        super().__init__()
        chans = [3, 64, 128, 256, 512]
        self.stages = nn.Sequential(*[nn.Sequential(nn.Conv2d(chans[i], chans[i + 1], 3, 2, 1), nn.PReLU(chans[i + 1]))
                                      for i in range(4)])
        self.fc5 = nn.Linear(512 * 7 * 6, feat)
        self.erase_gen = torch.Generator(device="cuda")
        self.erase_gen.manual_seed(0)

    def forward(self, x):
        keep = (torch.rand(x.size(0), 1, 1, 1, device=x.device, generator=self.erase_gen) > 0.1).float()  # HAZARD: rng
        x = x * keep
        return self.fc5(self.stages(x).flatten(1))


def build(num_classes=10574, batch=256):
    torch.manual_seed(1)  # CLEAN: seeded at start-up, before graphing
    net, head = Sphere20().cuda(), AngleLinear(512, num_classes).cuda()
    img = torch.randn(batch, 3, 112, 96, device="cuda")
    feat = torch.randn(batch, 512, device="cuda", requires_grad=True)
    label = torch.randint(0, num_classes, (batch,), device="cuda")
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        net, head = torch.cuda.make_graphed_callables((net, head), ((img,), (feat, label)))
    return net, head


def train(loader, epochs=20, lr=0.1):
    net, head = build()
    params = list(net.parameters()) + list(head.parameters())
    opt = torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=5e-4)
    for epoch in range(epochs):
        if epoch in (10, 15, 18):
            lr *= 0.1
            for g in opt.param_groups:
                g["lr"] = lr  # CLEAN: the SGD step is eager, so the new LR is used
        for img, label in loader:
            opt.zero_grad()
            loss = head(net(img.cuda(non_blocking=True)), label.cuda(non_blocking=True))  # CLEAN: H2D copies before the graphed call, outside any capture
            loss.backward()
            opt.step()
        print("epoch %d loss %.4f" % (epoch, loss.item()))
