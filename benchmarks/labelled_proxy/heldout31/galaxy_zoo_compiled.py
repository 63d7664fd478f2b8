"""Galaxy Zoo 2 morphology regression: 37 vote fractions from 11 decision-tree questions (ResNet-18).

The assistant compiled the loss and the optimizer step with
`options={"triton.cudagraphs": True}` ("CUDA graphs without the full max-autotune cost").
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

CG = {"triton.cudagraphs": True}
# answer slices of the 11 questions in the 37-column target
QUESTIONS = [(0, 3), (3, 5), (5, 7), (7, 9), (9, 13), (13, 15), (15, 18), (18, 25), (25, 28), (28, 31), (31, 37)]
MEAN = torch.tensor([0.044, 0.040, 0.029]).view(1, 3, 1, 1)
STD = torch.tensor([0.089, 0.077, 0.068]).view(1, 3, 1, 1)


class GalaxyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torchvision.models.resnet18(num_classes=37)

    def forward(self, x):
        logits = self.net(x)
        # per-question softmax keeps each question's answers summing to one
        return torch.cat([F.softmax(logits[:, a:b], 1) for a, b in QUESTIONS], 1)  # CLEAN: static Python slices


model = GalaxyNet().cuda().to(memory_format=torch.channels_last)
lr = torch.tensor(3e-4, device="cuda")
opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0, capturable=True)
mean_d, std_d = MEAN.cuda(), STD.cuda()


@torch.compile(options=CG)
def normalize_(images):
    return images.sub_(mean_d).div_(std_d)  # HAZARD: static-address


@torch.compile(options=CG)
def train_loss(images, targets):
    k = random.randint(0, 3)  # HAZARD: host-code
    images = torch.rot90(images, k, dims=(2, 3))
    pred = model(images)
    loss = F.mse_loss(pred, targets).sqrt()
    if torch.isnan(loss):  # HAZARD: dynamic-control-flow
        raise FloatingPointError("NaN RMSE")
    return loss


@torch.compile(options=CG)
def opt_step():
    opt.step()


@torch.compile  # default mode: no CUDA graphs
def eval_rmse(images, targets):
    images = (images - mean_d) / std_d
    pred = torch.stack([model(torch.rot90(images, k, dims=(2, 3))) for k in range(4)]).mean(0)
    return F.mse_loss(pred, targets).sqrt()


def train(loader, val_loader, epochs=20, warmup=2):
    for epoch in range(epochs):
        model.train()
        if epoch == warmup:
            for g in opt.param_groups:
                g["weight_decay"] = 0.05  # HAZARD: optimizer
        for step, (x, y) in enumerate(loader):  # drop_last=True, 128 x 3 x 224 x 224
            x = x.cuda(non_blocking=True).contiguous(memory_format=torch.channels_last)
            loss = train_loss(normalize_(x), y.cuda(non_blocking=True))
            if step % 100 == 0:
                print(f"epoch {epoch} step {step} rmse {loss.item():.4f}")  # CLEAN: read before backward and the compiled step
            loss.backward()
            opt_step()
            opt.zero_grad(set_to_none=True)
        lr.fill_(3e-4 * 0.5 ** (epoch // 5))  # CLEAN: tensor LR updated in place
        model.eval()
        with torch.no_grad():
            scores = [eval_rmse(x.cuda(), y.cuda()).item() for x, y in val_loader]  # CLEAN: default compile, no cudagraphs
        print(f"epoch {epoch} val rmse {sum(scores) / len(scores):.4f}")
