"""Full-step capture with a capturable Adam; LR warm-up handled after capture."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def make_model():
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))


def train(loader, steps=5000, base_lr=1e-3, warmup=500):
    model = make_model().cuda()
    opt = torch.optim.Adam(model.parameters(), lr=base_lr, capturable=True)
    aux = make_model().cuda()
    aux_lr = torch.tensor(base_lr, device="cuda")
    aux_opt = torch.optim.Adam(aux.parameters(), lr=aux_lr, capturable=True)
    sx = torch.zeros(64, 3, 32, 32, device="cuda")
    sy = torch.zeros(64, dtype=torch.long, device="cuda")

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            for m, o in ((model, opt), (aux, aux_opt)):
                o.zero_grad(set_to_none=True)
                F.cross_entropy(m(sx), sy).backward()
                o.step()
    torch.cuda.current_stream().wait_stream(side)

    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    aux_opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        loss = F.cross_entropy(model(sx), sy)
        loss.backward()
        opt.step()  # CLEAN: Adam built with capturable=True
        aux_loss = F.cross_entropy(aux(sx), sy)
        aux_loss.backward()
        aux_opt.step()

    it = iter(loader)
    for step in range(steps):
        x, y = next(it)
        sx.copy_(x, non_blocking=True)
        sy.copy_(y, non_blocking=True)
        scale = min(1.0, (step + 1) / warmup)
        for group in opt.param_groups:
            group["lr"] = base_lr * scale  # HAZARD: python-scalar
        aux_opt.param_groups[0]["lr"].fill_(base_lr * scale)  # CLEAN: tensor LR updated in place
        g.replay()
        if step % 200 == 0:
            print(step, loss.item(), aux_loss.item())
