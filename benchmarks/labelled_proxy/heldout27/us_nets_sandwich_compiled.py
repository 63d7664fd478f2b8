"""Universally slimmable networks (Yu & Huang, ICCV 2019): sandwich rule with
in-place distillation and random input resolution, the slimmable model compiled
with mode="reduce-overhead"; FLAGS follow the reference yaml configs."""
import random
from types import SimpleNamespace
import torch
import torch.nn as nn
import torch.nn.functional as F

FLAGS = SimpleNamespace(width_mult_range=[0.35, 1.0], num_sample_training=4, resolution_list=[224, 192, 160, 128],
                        eval_widths=[0.35, 0.5, 0.75, 1.0], inplace_distill=True, lr=0.5, num_epochs=250)

def make_divisible(v, divisor=8, min_value=1):
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v

class USConv2d(nn.Conv2d):
    def __init__(self, cin, cout, k, stride=1, us=(True, True)):
        super().__init__(cin, cout, k, stride, k // 2, bias=False)
        self.in_max, self.out_max, self.us, self.width_mult = cin, cout, us, 1.0

    def forward(self, x):
        w = self.width_mult  # HAZARD: python-scalar
        cin = make_divisible(self.in_max * w) if self.us[0] else self.in_max
        cout = make_divisible(self.out_max * w) if self.us[1] else self.out_max
        return F.conv2d(x, self.weight[:cout, :cin], None, self.stride, self.padding)

class USBatchNorm2d(nn.BatchNorm2d):
    def forward(self, x):
        c = x.size(1)
        return F.batch_norm(x, self.running_mean[:c], self.running_var[:c], self.weight[:c], self.bias[:c],
                            self.training, self.momentum, self.eps)  # CLEAN: channel count comes from the input shape

class USNet(nn.Module):
    def __init__(self, chans=(32, 64, 128, 256), n_cls=1000):
        super().__init__()
        layers, cin = [], 3
        for i, c in enumerate(chans):
            layers += [USConv2d(cin, c, 3, 2, us=(i > 0, True)), USBatchNorm2d(c), nn.ReLU(inplace=True)]
            cin = c
        self.features = nn.Sequential(*layers)
        self.head = USConv2d(cin, n_cls, 1, us=(True, False))

    def forward(self, x):
        return self.head(F.adaptive_avg_pool2d(self.features(x), 1)).flatten(1)

def set_width(model, w):
    model.apply(lambda m: setattr(m, "width_mult", w) if isinstance(m, USConv2d) else None)

def train_epoch(model, cmodel, loader, optimizer):
    lo, hi = FLAGS.width_mult_range
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        res = random.choice(FLAGS.resolution_list)
        x = F.interpolate(x, size=(res, res), mode="bilinear", align_corners=False)
        widths = [hi, lo] + [random.uniform(lo, hi) for _ in range(FLAGS.num_sample_training - 2)]  # CLEAN: widths drawn on the host, outside the compiled model
        optimizer.zero_grad()
        soft_target = None
        for w in widths:
            set_width(model, w)
            out = cmodel(x)  # HAZARD: dynamic-shape
            if w == hi:
                loss = F.cross_entropy(out, y)
                soft_target = F.softmax(out, dim=1).detach()  # CLEAN: computed eagerly before the next compiled call
            else:
                loss = F.kl_div(F.log_softmax(out, dim=1), soft_target, reduction="batchmean") if FLAGS.inplace_distill else F.cross_entropy(out, y)
            loss.backward()
        optimizer.step()

@torch.no_grad()
def eval_widths(model, cmodel, loader):
    model.eval()
    accs = {}
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        outs = []
        for w in FLAGS.eval_widths:
            set_width(model, w)
            outs.append(cmodel(x))  # HAZARD: static-address
        for w, o in zip(FLAGS.eval_widths, outs):
            accs.setdefault(w, []).append((o.argmax(1) == y).float().mean().item())
    model.train()
    return {w: sum(a) / len(a) for w, a in accs.items()}

def main(train_loader, val_loader):
    model = USNet().cuda()
    cmodel = torch.compile(model, mode="reduce-overhead")
    optimizer = torch.optim.SGD(model.parameters(), lr=FLAGS.lr, momentum=0.9, nesterov=True, weight_decay=4e-5)
    sched = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda e: 1 - e / FLAGS.num_epochs)  # CLEAN: eager optimizer, LR changes recompile nothing
    for epoch in range(FLAGS.num_epochs):
        train_epoch(model, cmodel, train_loader, optimizer)
        sched.step()
        print(epoch, eval_widths(model, cmodel, val_loader))
