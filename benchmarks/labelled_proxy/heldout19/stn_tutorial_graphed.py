"""Spatial Transformer Networks tutorial (PyTorch docs, Ghassen Hamrouni) -- my extended version.

Changes for the course benchmark: a random-rotation augmentation inside the STN, a forward
hook that records the predicted log-probabilities, and the whole net wrapped with
torch.cuda.make_graphed_callables under fp16 autocast.
"""
import math
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision import datasets, transforms

device = torch.device("cuda")
BATCH = 64
norm = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
train_loader = torch.utils.data.DataLoader(datasets.MNIST(root=".", train=True, download=True, transform=norm),
                                           batch_size=BATCH, shuffle=True, num_workers=4, drop_last=True)
test_loader = torch.utils.data.DataLoader(datasets.MNIST(root=".", train=False, transform=norm),
                                          batch_size=BATCH, shuffle=True, num_workers=4)


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)
        self.localization = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=7), nn.MaxPool2d(2, stride=2), nn.ReLU(True),
            nn.Conv2d(8, 10, kernel_size=5), nn.MaxPool2d(2, stride=2), nn.ReLU(True))
        self.fc_loc = nn.Sequential(nn.Linear(10 * 3 * 3, 32), nn.ReLU(True), nn.Linear(32, 3 * 2))
        self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))  # CLEAN: identity init at construction time, not in forward
        self.max_angle = math.radians(15)

    def stn(self, x):
        xs = self.localization(x)
        theta = self.fc_loc(xs.view(-1, 10 * 3 * 3)).view(-1, 2, 3)
        if self.training:
            a = random.uniform(-self.max_angle, self.max_angle)  # HAZARD: host-code
            rot = torch.tensor([[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0]]).cuda()  # HAZARD: pinned-memory
            theta = theta + (rot - torch.eye(2, 3, device=x.device))
        grid = F.affine_grid(theta, x.size(), align_corners=False)
        return F.grid_sample(x, grid, align_corners=False)

    def forward(self, x):
        x = self.stn(x)
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        return F.log_softmax(self.fc2(x), dim=1)


recorded = []
model = Net().to(device)
model.register_forward_hook(lambda m, inp, out: recorded.append(out.detach()))  # HAZARD: api-misuse
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
sample = torch.randn(BATCH, 1, 28, 28, device=device)
with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
    model = torch.cuda.make_graphed_callables(model, (sample,))


def train(epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % 500 == 0:
            print("Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}".format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()))  # CLEAN: loss read eagerly after backward, outside the graphed callable


def test():
    with torch.no_grad():
        model.eval()
        test_loss, correct = 0, 0
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)  # CLEAN: eval mode differs from the graphed (train) mode, so the original forward runs (last batch is 16)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.max(1, keepdim=True)[1]
            correct += pred.eq(target.view_as(pred)).sum().item()
        test_loss /= len(test_loader.dataset)
        print("\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n".format(
            test_loss, correct, len(test_loader.dataset), 100. * correct / len(test_loader.dataset)))


for epoch in range(1, 20 + 1):
    train(epoch)
    test()
