"""Captured forward that overlaps an auxiliary head on a side stream."""
import torch
import torch.nn as nn


class TwoHeadNet(nn.Module):
    def __init__(self, dim=1024, n_cls=1000):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))
        self.cls_head = nn.Linear(dim, n_cls)
        self.aux_head = nn.Linear(dim, 64)
        self.stat_head = nn.Linear(dim, 1)
        self.aux_stream = torch.cuda.Stream()
        self.stat_stream = torch.cuda.Stream()

    def forward(self, x):
        feat = self.trunk(x)
        cur = torch.cuda.current_stream()
        self.aux_stream.wait_stream(cur)  # CLEAN: fork from the capturing stream
        with torch.cuda.stream(self.aux_stream):
            aux = self.aux_head(feat)
        cur.wait_stream(self.aux_stream)  # CLEAN: side stream joined back before capture ends
        self.stat_stream.wait_stream(cur)
        with torch.cuda.stream(self.stat_stream):  # HAZARD: stream
            stat = self.stat_head(feat).sigmoid()
        logits = self.cls_head(feat)
        torch.cuda.default_stream().wait_stream(cur)  # HAZARD: stream
        with torch.cuda.stream(torch.cuda.default_stream()):  # HAZARD: stream
            logits = logits.float()
        return logits, aux, stat


def capture(net, bs=256, dim=1024):
    x = torch.randn(bs, dim, device="cuda")
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm), torch.no_grad():
        for _ in range(3):
            net(x)
    torch.cuda.current_stream().wait_stream(warm)
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g):
        outs = net(x)
    return g, x, outs


if __name__ == "__main__":
    g, x, (logits, aux, stat) = capture(TwoHeadNet().cuda().eval())
    for _ in range(100):
        x.normal_()
        g.replay()
    print(logits.argmax(-1)[:8].tolist())
