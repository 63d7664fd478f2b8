# Bottom-up multi-person pose estimation with Part Affinity Fields (CMU OpenPose, 2017 PyTorch port).
# Training compiles the 6-stage CPM with mode="max-autotune"; the demo compiles peak finding as well.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

N_PAF, N_HEAT = 38, 19


def stage(cin, first):
    k, p, mid = (3, 1, 128) if first else (7, 3, 128)
    return nn.Sequential(nn.Conv2d(cin, mid, k, 1, p), nn.ReLU(True), nn.Conv2d(mid, mid, k, 1, p), nn.ReLU(True),
                         nn.Conv2d(mid, 512 if first else mid, 1), nn.ReLU(True))


class CPM(nn.Module):
    def __init__(self, n_stages=6):
        super().__init__()
        self.vgg = nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1), nn.ReLU(True), nn.MaxPool2d(2), nn.Conv2d(64, 128, 3, 1, 1),
                                 nn.ReLU(True), nn.MaxPool2d(2), nn.Conv2d(128, 128, 3, 1, 1), nn.ReLU(True), nn.MaxPool2d(2))
        cin = [128] + [128 + N_PAF + N_HEAT] * (n_stages - 1)
        self.paf = nn.ModuleList([nn.Sequential(stage(c, i == 0), nn.Conv2d(512 if i == 0 else 128, N_PAF, 1)) for i, c in enumerate(cin)])
        self.heat = nn.ModuleList([nn.Sequential(stage(c, i == 0), nn.Conv2d(512 if i == 0 else 128, N_HEAT, 1)) for i, c in enumerate(cin)])

    def forward(self, x):
        f = self.vgg(x)
        out, saved = f, []
        for paf, heat in zip(self.paf, self.heat):
            p, h = paf(out), heat(out)
            saved += [p, h]
            out = torch.cat([p, h, f], 1)
        return saved


@torch.compile(mode="max-autotune")
def stage_losses(saved, heat_t, heat_mask, paf_t, paf_mask):
    total = 0.0
    for i in range(0, len(saved), 2):
        l_paf = ((saved[i] - paf_t) ** 2 * paf_mask).sum() / 2.0 / heat_t.size(0)  # CLEAN: mask_miss weighting, no shape change
        l_heat = ((saved[i + 1] - heat_t) ** 2 * heat_mask).sum() / 2.0 / heat_t.size(0)
        print("stage %d paf %s heat %s" % (i // 2, l_paf, l_heat))  # HAZARD: host-code
        total = total + l_paf + l_heat
    return total


@torch.compile(mode="reduce-overhead")
def find_peaks(heat, thre1=0.1):
    smooth = F.avg_pool2d(heat, 3, 1, 1)
    is_peak = (smooth == F.max_pool2d(smooth, 3, 1, 1)) & (smooth > thre1)  # CLEAN: max-pool NMS on a fixed-shape map
    n_peaks = int(is_peak.sum())  # HAZARD: host-sync
    peaks = torch.nonzero(is_peak[0])  # HAZARD: dynamic-shape
    return peaks[: min(n_peaks, 64)], smooth


@torch.compile(mode="reduce-overhead")
def paf_score(paf, a, b, n_mid=10):
    vec = (b - a).float()
    norm = vec.norm()
    if norm < 1e-6:  # HAZARD: dynamic-control-flow
        return torch.zeros((), device=paf.device)
    t = torch.linspace(0, 1, n_mid, device=paf.device).unsqueeze(1)
    pts = (a.float() + t * vec).round().long()
    field = paf[:, pts[:, 0], pts[:, 1]]
    return (field * (vec / norm).view(2, 1)).sum(0).mean()


def train(loader, epochs=100):
    model = torch.compile(CPM().cuda(), mode="max-autotune")
    opt = torch.optim.SGD(model.parameters(), lr=4e-5, momentum=0.9, weight_decay=5e-4)
    for epoch in range(epochs):
        for img, heat_t, heat_mask, paf_t, paf_mask in loader:
            loss = stage_losses(model(img.cuda()), heat_t.cuda(), heat_mask.cuda(), paf_t.cuda(), paf_mask.cuda())
            opt.zero_grad()
            loss.backward()
            opt.step()


@torch.no_grad()
def demo(model, img, limb=(1, 2), paf_ch=(12, 13)):
    saved = model(img)
    heat, paf = saved[-1].clone(), saved[-2].clone()  # CLEAN: outputs cloned before the next compiled call
    peaks_a = find_peaks(heat[:, limb[0]:limb[0] + 1].squeeze(1))[0].clone()
    peaks_b = find_peaks(heat[:, limb[1]:limb[1] + 1].squeeze(1))[0].clone()  # CLEAN: cloned before the next compiled call
    limb_paf = paf[0, list(paf_ch)]  # CLEAN: Python-list index in eager code, outside the compiled functions
    cand = [(i, j, paf_score(limb_paf, pa, pb).item()) for i, pa in enumerate(peaks_a) for j, pb in enumerate(peaks_b)]
    conn = sorted(cand, key=lambda c: -c[2])
    peaks_np = heat[0].cpu().numpy()  # CLEAN: eager host copy for the NumPy part grouping, outside the compiled functions
    return conn, np.argmax(peaks_np.reshape(N_HEAT, -1), 1)
