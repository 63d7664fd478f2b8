"""On-device personalisation of a Zero-DCE low-light enhancer (camera app).

The curve-estimation net is conditioned on a target exposure that the user
sets with the "night brightness" slider. While the phone charges, the app
fine-tunes the net on the user's own night shots with the zero-reference
losses. The net is graphed with torch.cuda.make_graphed_callables.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

N_ITERS, BATCH = 8, 8


class CondDCENet(nn.Module):
    def __init__(self, gamma_lut, ch=32):
        super().__init__()
        self.gamma_lut = gamma_lut.astype(np.float32)
        self.exposure_target = 0.6
        self.c1 = nn.Conv2d(4, ch, 3, padding=1)
        self.c2 = nn.Conv2d(ch, ch, 3, padding=1)
        self.c3 = nn.Conv2d(ch, ch, 3, padding=1)
        self.curve = nn.Conv2d(2 * ch, 3 * N_ITERS, 3, padding=1)

    def forward(self, x):
        lut = torch.from_numpy(self.gamma_lut).cuda()  # HAZARD: pinned-memory
        x = lut[(x.clamp(0, 1) * 255).long()]
        target = self.exposure_target  # HAZARD: python-scalar
        cond = torch.full_like(x[:, :1], target)
        h1 = F.relu(self.c1(torch.cat([x, cond], 1)))
        h2 = F.relu(self.c2(h1))
        h3 = F.relu(self.c3(h2))
        alphas = torch.tanh(self.curve(torch.cat([h1, h3], 1))).chunk(N_ITERS, dim=1)
        for a in alphas:
            x = x + a * x * (1 - x)
        return x


def zero_reference_loss(img, enh, e_target):
    pool = F.avg_pool2d(enh.mean(1, keepdim=True), 16)
    l_exp = (pool - e_target).abs().mean()
    mr, mg, mb = enh.mean(dim=(2, 3)).unbind(1)
    l_col = ((mr - mg) ** 2 + (mr - mb) ** 2 + (mb - mg) ** 2).mean()
    d_in, d_out = F.avg_pool2d(img.mean(1, keepdim=True), 4), F.avg_pool2d(enh.mean(1, keepdim=True), 4)
    l_spa = ((d_out.diff(dim=-1) - d_in.diff(dim=-1)) ** 2).mean()
    return 10.0 * l_exp + 5.0 * l_col + l_spa


def grad_watch(module, grad_in, grad_out):
    module.grad_peak = grad_out[0].abs().amax()


class Personaliser:
    def __init__(self, net, factory_state):
        self.net = net.cuda().train()
        self.factory = {k: v.detach().clone().cuda() for k, v in factory_state.items()}
        self.net.register_full_backward_hook(grad_watch)  # HAZARD: api-misuse
        sample = torch.rand(BATCH, 3, 256, 256, device="cuda")
        self.g_net = torch.cuda.make_graphed_callables(self.net, (sample,))
        self.net.c1.register_forward_hook(lambda m, i, o: None)  # CLEAN: hook added after graphing
        self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-4)

    def set_brightness(self, slider):
        self.net.exposure_target = 0.4 + 0.4 * slider

    def reset_to_factory(self):
        with torch.no_grad():
            for name, p in self.net.named_parameters():
                if name != "curve.weight":
                    p.copy_(self.factory[name])  # CLEAN: in-place restore keeps the captured addresses
        self.net.curve.weight = nn.Parameter(self.factory["curve.weight"].clone())  # HAZARD: static-address

    def train_on(self, shots, steps=200):
        for i in range(steps):
            img = shots[i % len(shots)]
            enh = self.g_net(img)  # CLEAN: positional tensor argument
            loss = zero_reference_loss(img, enh, self.net.exposure_target)
            self.opt.zero_grad(set_to_none=False)
            loss.backward()
            self.opt.step()
        return float(loss)


if __name__ == "__main__":
    lut = (np.arange(256) / 255.0) ** (1 / 2.2)
    net = CondDCENet(lut)
    p = Personaliser(net, net.state_dict())
    night_shots = [torch.rand(BATCH, 3, 256, 256, device="cuda") * 0.2 for _ in range(16)]
    print(p.train_on(night_shots))
    p.set_brightness(0.9)
    print(p.train_on(night_shots))
    p.reset_to_factory()
