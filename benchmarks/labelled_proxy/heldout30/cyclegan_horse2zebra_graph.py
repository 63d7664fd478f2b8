# CycleGAN horse2zebra trainer (pytorch-CycleGAN-and-pix2pix, 2017 layout). The generator update
# is captured with torch.cuda.graph after warm-up; the discriminators still train eagerly.
import random
import torch
import torch.nn as nn
from torch.autograd import Variable


class ImagePool:
    def __init__(self, pool_size=50):
        self.pool_size, self.images = pool_size, []

    def query(self, images):
        out = []
        for image in images:
            image = torch.unsqueeze(image.data, 0)
            if len(self.images) < self.pool_size:
                self.images.append(image)  # HAZARD: static-address
                out.append(image)
            elif random.uniform(0, 1) > 0.5:  # CLEAN: CPU RNG in the eager pool query, outside the capture
                idx = random.randint(0, self.pool_size - 1)
                out.append(self.images[idx].clone())
                self.images[idx] = image.clone()
            else:
                out.append(image.clone())
        return torch.cat(out, 0)


class GANLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("real_label", torch.tensor(1.0))
        self.register_buffer("fake_label", torch.tensor(0.0))

    def forward(self, pred, is_real):
        target = (self.real_label if is_real else self.fake_label).expand_as(pred)  # CLEAN: registered buffer, same storage every replay
        return nn.functional.mse_loss(pred, target)


class CycleGANModel:
    def __init__(self, G_A, G_B, D_A, D_B, lambda_A=10.0, lambda_B=10.0, lambda_idt=0.5):
        self.G_A, self.G_B, self.D_A, self.D_B = G_A.cuda(), G_B.cuda(), D_A.cuda(), D_B.cuda()
        self.crit = GANLoss().cuda()
        self.lA, self.lB, self.lidt = lambda_A, lambda_B, lambda_idt
        self.opt_G = torch.optim.Adam(list(G_A.parameters()) + list(G_B.parameters()), lr=2e-4,
                                      betas=(0.5, 0.999), capturable=True)
        self.opt_D = torch.optim.Adam(list(D_A.parameters()) + list(D_B.parameters()), lr=2e-4, betas=(0.5, 0.999))
        rule = lambda ep: 1.0 - max(0, ep + 1 - 100) / 101.0
        self.sched_G = torch.optim.lr_scheduler.LambdaLR(self.opt_G, lr_lambda=rule)
        self.real_A = Variable(torch.zeros(1, 3, 256, 256).cuda())
        self.real_B = Variable(torch.zeros(1, 3, 256, 256).cuda())
        self.pool_A, self.pool_B = ImagePool(), ImagePool()
        self.losses = {}

    def backward_G(self):
        for p in list(self.D_A.parameters()) + list(self.D_B.parameters()):
            p.requires_grad = False
        self.fake_B, self.fake_A = self.G_A(self.real_A), self.G_B(self.real_B)
        rec_A, rec_B = self.G_B(self.fake_B), self.G_A(self.fake_A)
        idt = (self.G_A(self.real_B) - self.real_B).abs().mean() * self.lB * self.lidt
        loss_G = (self.crit(self.D_A(self.fake_B), True) + self.crit(self.D_B(self.fake_A), True)
                  + (rec_A - self.real_A).abs().mean() * self.lA + (rec_B - self.real_B).abs().mean() * self.lB + idt)
        loss_G.backward()
        self.losses["G"] = float(loss_G)  # HAZARD: host-sync
        self.loss_G = loss_G

    def step_G(self):
        self.opt_G.zero_grad(set_to_none=False)
        self.backward_G()
        self.opt_G.step()  # CLEAN: Adam built with capturable=True

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.step_G()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.amp.autocast():  # HAZARD: autocast-cache
            with torch.cuda.graph(self.graph):
                self.step_G()

    def optimize(self, batch):
        self.real_A.data.copy_(batch["A"])  # CLEAN: in-place copy into the static input
        self.real_B.data.copy_(batch["B"])
        self.graph.replay()
        for p in list(self.D_A.parameters()) + list(self.D_B.parameters()):
            p.requires_grad = True
        self.opt_D.zero_grad()
        fake_B, fake_A = self.pool_B.query(self.fake_B), self.pool_A.query(self.fake_A)
        loss_D = (self.crit(self.D_A(self.real_B), True) + self.crit(self.D_A(fake_B), False)
                  + self.crit(self.D_B(self.real_A), True) + self.crit(self.D_B(fake_A), False)) * 0.5
        loss_D.backward()
        self.opt_D.step()  # CLEAN: eager discriminator step, not captured


def train(model, loader, n_epochs=200):
    model.capture()
    for epoch in range(n_epochs):
        for batch in loader:
            model.optimize(batch)
        model.sched_G.step()  # HAZARD: optimizer
        print("epoch %d  G %.3f" % (epoch, model.loss_G.item()))  # CLEAN: after replay, outside the capture
