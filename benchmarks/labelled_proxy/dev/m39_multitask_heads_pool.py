"""Multi-task fine-tuning: one captured step per task head, graphs share one pool."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Backbone(nn.Module):
    def __init__(self, d=512):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, d))

    def forward(self, x):
        return self.net(x)


def main(task="cls", steps=1000, bs=128, d=512):
    backbone = Backbone(d).cuda()
    cls_head, reg_head = nn.Linear(d, 10).cuda(), nn.Linear(d, 1).cuda()
    opt_bb = torch.optim.AdamW(backbone.parameters(), lr=1e-4, capturable=True)
    opt_cls = torch.optim.Adam(cls_head.parameters(), lr=1e-3, fused=True)
    opt_reg = torch.optim.NAdam(reg_head.parameters(), lr=1e-3)
    x = torch.randn(bs, d, device="cuda")
    y_cls = torch.randint(0, 10, (bs,), device="cuda")
    y_reg = torch.randn(bs, 1, device="cuda")

    head, opt_head, target = (cls_head, opt_cls, y_cls) if task == "cls" else (reg_head, opt_reg, y_reg)
    loss_fn = F.cross_entropy if task == "cls" else F.mse_loss
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            loss_fn(head(backbone(x)), target).backward()
            opt_bb.step()
            opt_head.step()
    torch.cuda.current_stream().wait_stream(side)

    pool = torch.cuda.graph_pool_handle()
    g_main, g_aux = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    if task == "cls":
        with torch.cuda.graph(g_main, pool=pool):  # CLEAN: exclusive if/else branches, g_main is captured once
            loss = F.cross_entropy(cls_head(backbone(x)), y_cls)
            loss.backward()
            opt_bb.step()  # CLEAN: backbone optimizer is capturable
            opt_cls.step()  # HAZARD: optimizer
    else:
        with torch.cuda.graph(g_main, pool=pool):
            loss = F.mse_loss(reg_head(backbone(x)), y_reg)
            loss.backward()
            opt_reg.step()  # HAZARD: optimizer

    with torch.cuda.stream(side):
        for _ in range(3):
            backbone(x).norm().backward()
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(g_aux, pool=pool):
        aux = backbone(x).norm()
        if aux > 100.0:  # HAZARD: dynamic-control-flow
            aux = aux / 100.0
        aux.backward()
    with torch.cuda.graph(g_aux, pool=pool):  # HAZARD: api-misuse
        aux = backbone(x).norm()
        aux.backward()

    for step in range(steps):
        x.copy_(torch.randn_like(x))
        g_main.replay()
        g_aux.replay()
        if step % 100 == 0:
            print(step, loss.item(), aux.item())
