# Temporal Convolutional Network on (permuted) sequential MNIST, from locuslab/TCN (2018, torch 0.4:
# weight_norm, Variable, `.data` everywhere). Train and eval steps are compiled with mode="max-autotune".
import argparse
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable
from torch.nn.utils import weight_norm

parser = argparse.ArgumentParser()
parser.add_argument("--permute", action="store_true", default=True)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--clip", type=float, default=-1)
args = parser.parse_args([])


class TemporalBlock(nn.Module):
    def __init__(self, cin, cout, k, dilation, dropout=0.05):
        super().__init__()
        pad = (k - 1) * dilation
        self.conv1 = weight_norm(nn.Conv1d(cin, cout, k, padding=pad, dilation=dilation))
        self.conv2 = weight_norm(nn.Conv1d(cout, cout, k, padding=pad, dilation=dilation))
        self.pad, self.dropout = pad, dropout
        self.downsample = nn.Conv1d(cin, cout, 1) if cin != cout else None

    def forward(self, x):
        out = F.dropout(F.relu(self.conv1(x)[:, :, :-self.pad]), self.dropout, self.training)  # CLEAN: dropout on the default CUDA generator
        out = F.dropout(F.relu(self.conv2(out)[:, :, :-self.pad]), self.dropout, self.training)
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class TCN(nn.Module):
    def __init__(self, cin=1, n_classes=10, channels=(25,) * 8, k=7):
        super().__init__()
        self.network = nn.Sequential(*[TemporalBlock(cin if i == 0 else channels[i - 1], c, k, 2 ** i) for i, c in enumerate(channels)])
        self.linear = nn.Linear(channels[-1], n_classes)

    def forward(self, x):
        y = self.network(x)
        print("tcn out", y.shape)  # HAZARD: host-code
        return F.log_softmax(self.linear(y[:, :, -1]), 1)


model = TCN().cuda()
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
permute = torch.from_numpy(np.random.permutation(784)).long().cuda()  # CLEAN: built once at start-up, outside the compiled code
input_noise = 0.1


@torch.compile(mode="max-autotune")
def train_step(data, target):
    data = data.view(-1, 1, 784)
    if args.permute:  # CLEAN: Python flag fixed for the run
        data = data[:, :, permute]  # CLEAN: index tensor already on the device
    data = data + input_noise * torch.randn_like(data)  # HAZARD: python-scalar
    loss = F.nll_loss(model(data), target)
    if torch.isinf(loss):  # HAZARD: dynamic-control-flow
        loss = torch.zeros_like(loss)
    return loss


@torch.compile(mode="max-autotune")
def eval_step(data, target):
    output = model(data.view(-1, 1, 784)[:, :, permute])
    pred = output.argmax(1, keepdim=True)
    return F.nll_loss(output, target, reduction="sum"), pred.eq(target.view_as(pred)).cpu().sum()  # HAZARD: host-sync


def train(train_loader, test_loader, epochs=20):
    global input_noise
    for epoch in range(1, epochs + 1):
        input_noise = 0.1 / epoch
        model.train()
        for batch_idx, (data, target) in enumerate(train_loader):
            data, target = Variable(data.cuda()), Variable(target.cuda())
            optimizer.zero_grad()
            loss = train_step(data, target)
            loss.backward()
            optimizer.step()
        model.eval()
        correct = 0
        with torch.no_grad():
            for data, target in test_loader:
                _, c = eval_step(data.cuda(), target.cuda())
                correct += int(c)  # CLEAN: eager host read right after the call
        print("epoch %d acc %.2f%%" % (epoch, 100.0 * correct / len(test_loader.dataset)))
