"""Left-ventricular ejection fraction from apical-4-chamber echo clips (EchoNet-Dynamic style).

Frame encoder, temporal convolution and EF head are graphed together with
torch.cuda.make_graphed_callables; 32-frame clips, batch 16, mixed precision.
"""
import torch
import torch.nn as nn

T, HW = 32, 112


class FrameEncoder(nn.Module):
    def __init__(self, gen):
        super().__init__()
        self.gen = gen
        self.cnn = nn.Sequential(nn.Conv2d(3, 32, 5, stride=2, padding=2), nn.ReLU(),
                                 nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
                                 nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.ReLU(),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten())

    def forward(self, clip):                                         # (B, T, 3, H, W)
        b = clip.shape[0]
        drop = torch.rand(b, T, 1, 1, 1, device=clip.device, generator=self.gen) < 0.1  # HAZARD: rng
        clip = clip.masked_fill(drop, 0.0)
        return self.cnn(clip.flatten(0, 1)).view(b, T, -1)


class TemporalConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(128, 128, 3, padding=1), nn.ReLU(), nn.Conv1d(128, 64, 3, padding=1))
        self.key_frames = [0, 10, 20, 31]                            # ED / mid-systole / ES / late diastole

    def forward(self, f):
        h = self.conv(f.transpose(1, 2)).transpose(1, 2)             # (B, T, 64)
        keys = h[:, self.key_frames]  # HAZARD: host-sync
        return torch.cat([h.mean(1), keys.flatten(1)], 1)


class EFHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(64 * 5, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, z):
        if torch.isnan(z).any():  # HAZARD: dynamic-control-flow
            z = torch.nan_to_num(z)
        return 100.0 * torch.sigmoid(self.fc(z)).squeeze(1)


def build(batch=16):
    gen = torch.Generator(device="cuda").manual_seed(0)
    enc, tmp, head = FrameEncoder(gen).cuda(), TemporalConv().cuda(), EFHead().cuda()
    clip = torch.randn(batch, T, 3, HW, HW, device="cuda")
    f = torch.randn(batch, T, 128, device="cuda", requires_grad=True)
    z = torch.randn(batch, 64 * 5, device="cuda", requires_grad=True)
    pool = torch.cuda.graph_pool_handle()
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        graphed = torch.cuda.make_graphed_callables((enc, tmp, head), ((clip,), (f,), (z,)), pool=pool)
    return (enc, tmp, head), graphed


def train(loader, epochs=45):
    mods, (g_enc, g_tmp, g_head) = build()
    params = [p for m in mods for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=1e-4, momentum=0.9, weight_decay=1e-4)
    for epoch in range(epochs):
        total = torch.zeros((), device="cuda")
        for clip, ef in loader:
            pred = g_head(g_tmp(g_enc(clip)))  # CLEAN: graphed callables chained with positional tensors
            loss = nn.functional.mse_loss(pred, ef)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.detach()
        print(f"epoch {epoch} mse {total.item() / len(loader):.2f}")  # CLEAN: host read outside the graphed modules


def predict_ef(mods, clip):
    enc, tmp, head = mods
    with torch.no_grad():
        f = tmp(enc.cnn(clip.flatten(0, 1)).view(clip.shape[0], T, -1))
        return head(torch.nan_to_num(f))  # CLEAN: nan_to_num on the eager path, no host branch needed


if __name__ == "__main__":
    data = [(torch.randn(16, T, 3, HW, HW, device="cuda"), torch.rand(16, device="cuda") * 80) for _ in range(10)]
    train(data, epochs=2)
