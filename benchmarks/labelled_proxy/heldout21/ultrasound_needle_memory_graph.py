"""Needle tracking in B-mode ultrasound during nerve blocks: memory-based segmentation, where the
current frame reads from keys/values of past frames. `track_eager` is the lab's reference (the
memory grows with torch.cat); the cart software uses `GraphedNeedleTracker`, which keeps a ring
buffer of MEM_SLOTS frames so that one CUDA graph is replayed per frame."""
import torch
import torch.nn as nn
import torch.nn.functional as F

MEM_SLOTS, TOPK = 8, 30   # 8 past frames, top-30 affinity readout


class KeyEncoder(nn.Module):
    def __init__(self, dk=64):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 64, 7, 4, 3), nn.ReLU(), nn.Conv2d(64, 128, 3, 2, 1), nn.ReLU())
        self.key = nn.Conv2d(128, dk, 1)

    def forward(self, img):
        f = self.net(img)
        return f, self.key(f)


class ValueEncoder(nn.Module):
    def __init__(self, dv=128):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(128 + 1, dv, 3, padding=1), nn.ReLU())

    def forward(self, feat, mask):
        return self.net(torch.cat([feat, F.interpolate(mask, size=feat.shape[-2:], mode="bilinear")], 1))


class Decoder(nn.Module):
    def __init__(self, dv=128):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(128 + dv + 1, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 1, 1))

    def forward(self, feat, readout, prior, size):
        prior = F.interpolate(prior, size=feat.shape[-2:], mode="bilinear")
        return F.interpolate(self.net(torch.cat([feat, readout, prior], 1)), size=size, mode="bilinear")


def readout(qk, mem_k, mem_v):
    # qk (1, dk, HW), mem_k (1, dk, N), mem_v (1, dv, N)
    aff = torch.einsum("bcq,bcn->bnq", qk, mem_k) / qk.shape[1] ** 0.5
    vals, idx = aff.topk(TOPK, dim=1)  # CLEAN: top-k has a fixed output shape
    dense = torch.zeros_like(aff).scatter_(1, idx, torch.softmax(vals, dim=1))
    return torch.einsum("bnq,bcn->bcq", dense, mem_v)


class GraphedNeedleTracker:
    def __init__(self, kenc, venc, dec, H=448, W=576, device="cuda"):
        self.kenc, self.venc, self.dec = kenc.to(device).eval(), venc.to(device).eval(), dec.to(device).eval()
        hw = (H // 8) * (W // 8)
        self.frame, self.last_mask = torch.zeros(1, 1, H, W, device=device), torch.zeros(1, 1, H, W, device=device)
        self.mem_k, self.mem_v = (torch.zeros(1, d, MEM_SLOTS, hw, device=device) for d in (64, 128))
        self.write_slot = 0
        self.frames_t = torch.zeros((), dtype=torch.long, device=device)
        self.aux = torch.cuda.Stream()
        self.g = torch.cuda.CUDAGraph()

    def _step(self):
        feat, qk = self.kenc(self.frame)
        r = readout(qk.flatten(2), self.mem_k.flatten(2), self.mem_v.flatten(2))
        prob = torch.sigmoid(self.dec(feat, r.view(1, -1, *feat.shape[-2:]), self.last_mask, self.frame.shape[-2:]))
        area = int((prob > 0.5).sum())  # HAZARD: host-sync
        if area < 64:                                   # needle out of plane: decay the previous mask
            prob = 0.9 * self.last_mask
        slot = self.write_slot  # HAZARD: python-scalar
        self.mem_k[:, :, slot] = qk.flatten(2)
        with torch.cuda.stream(self.aux):  # HAZARD: stream
            self.mem_v[:, :, slot] = self.venc(feat, prob).flatten(2)
        self.last_mask = prob  # HAZARD: static-address
        self.frames_t.add_(1)  # CLEAN: device-side frame counter, replayed every time
        return prob

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.g):
            self.out = self._step()

    @torch.no_grad()
    def track(self, frames, first_mask):
        self.last_mask.copy_(first_mask)
        masks = []
        for fr in frames:
            self.frame.copy_(fr)
            self.g.replay()
            self.write_slot = (self.write_slot + 1) % MEM_SLOTS
            masks.append((self.out > 0.5).cpu())  # CLEAN: thresholded host copy, not a view of the graph output
        return masks


@torch.no_grad()
def track_eager(kenc, venc, dec, frames, first_mask):
    feat, k = kenc(frames[0])
    mem_k, mem_v, prev, out = k.flatten(2), venc(feat, first_mask).flatten(2), first_mask, []
    for fr in frames[1:]:
        feat, k = kenc(fr)
        r = readout(k.flatten(2), mem_k, mem_v)
        prev = torch.sigmoid(dec(feat, r.view(1, -1, *feat.shape[-2:]), prev, fr.shape[-2:]))
        mem_k = torch.cat([mem_k, k.flatten(2)], -1)  # CLEAN: eager reference, the growing memory never enters a graph
        mem_v = torch.cat([mem_v, venc(feat, prev).flatten(2)], -1)
        out.append(prev > 0.5)
    return out
