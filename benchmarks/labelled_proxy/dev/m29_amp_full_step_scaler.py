"""fp16 training step captured whole, with GradScaler and gradient accumulation."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Classifier(nn.Module):
    def __init__(self, d=768, n_cls=2, pooling="cls"):
        super().__init__()
        self.pooling = pooling
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 12, batch_first=True), 2)
        self.head = nn.Linear(d, n_cls)
        self.micro_step = 0

    def forward(self, x):
        h = self.enc(x)
        h = h[:, 0] if self.pooling == "cls" else h.mean(1)  # CLEAN: string comparison on a config value
        self.micro_step += 1  # HAZARD: host-code
        return self.head(h)


def build_graph(model, opt, scaler, sx, sy, accum=2):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # CLEAN: warm-up only, cache disabled
                loss = F.cross_entropy(model(sx), sy)
            scaler.scale(loss).backward()
    torch.cuda.current_stream().wait_stream(side)
    opt.zero_grad(set_to_none=False)

    g = torch.cuda.CUDAGraph()
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        with torch.cuda.graph(g):
            for _ in range(accum):
                loss = F.cross_entropy(model(sx), sy) / accum
                scaler.scale(loss).backward()
            scaler.unscale_(opt)
            gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if gnorm.isfinite():  # HAZARD: dynamic-control-flow
                scaler.step(opt)  # HAZARD: host-sync
            scaler.update()
    return g, loss


def main(loader):
    model = Classifier().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5, capturable=True)
    scaler = torch.cuda.amp.GradScaler()
    sx = torch.zeros(16, 128, 768, device="cuda")
    sy = torch.zeros(16, dtype=torch.long, device="cuda")
    g, loss = build_graph(model, opt, scaler, sx, sy)
    for x, y in loader:
        sx.copy_(x)
        sy.copy_(y)
        g.replay()
