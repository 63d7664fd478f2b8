import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("trainer")


class ConvNet(nn.Module):
    def __init__(self, num_classes: int = 10, act: str = "gelu"):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
            nn.AdaptiveAvgPool2d(4),
        )
        self.head = nn.Linear(128 * 16, num_classes)
        self.act = act
        self.num_calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4:  # CLEAN: int comparison on the tensor rank, static under compile
            raise ValueError(f"expected NCHW input, got shape {tuple(x.shape)}")  # CLEAN: f-string of a shape tuple in a raise message
        self.num_calls += 1  # HAZARD: host-code
        log.debug("forward batch=%d", x.shape[0])  # HAZARD: host-code
        h = self.features(x)
        if torch.isnan(h).any():  # HAZARD: dynamic-control-flow
            h = torch.nan_to_num(h)
        h = F.gelu(h) if self.act == "gelu" else F.relu(h)  # CLEAN: string comparison on a module attribute
        return self.head(h.flatten(1))


def train(loader, val_loader, epochs: int = 5) -> nn.Module:
    net = ConvNet().cuda().to(memory_format=torch.channels_last)
    model = torch.compile(net, mode="max-autotune")
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    for epoch in range(epochs):
        model.train()
        for step, (x, y) in enumerate(loader):
            x = x.cuda(non_blocking=True).to(memory_format=torch.channels_last)
            y = y.cuda(non_blocking=True)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if step % 100 == 0:
                log.info("epoch %d step %d loss %.4f", epoch, step, loss.item())  # CLEAN: logging and .item() in the eager loop, outside the compiled module
        model.eval()
        preds = []
        with torch.no_grad():
            for x, _ in val_loader:
                preds.append(model(x.cuda()).argmax(1))  # CLEAN: argmax makes a new eager tensor from the graph output
        print(epoch, torch.cat(preds).bincount(minlength=10))
    return net
