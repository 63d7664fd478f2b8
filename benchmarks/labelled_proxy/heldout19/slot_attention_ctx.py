"""Slot Attention (Locatello et al. 2020) object discovery on CLEVR6 -- evaluation script.

Inference goes through a small `captured()` context manager: whatever runs inside the `with`
block is recorded into a CUDA graph on a side stream and replayed for every batch.
Metric: foreground ARI against the ground-truth object masks.
"""
import contextlib
import logging

import numpy as np
import torch
import torch.nn as nn

log = logging.getLogger("slots")
RES, K, D, ITERS, BATCH = 128, 7, 64, 3, 32

@contextlib.contextmanager
def captured(pool=None):
    g = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.graph(g, pool=pool, stream=side):  # HAZARD: api-misuse
        yield g
    torch.cuda.current_stream().wait_stream(side)

def build_grid(res):
    r = torch.linspace(0.0, 1.0, res)
    gy, gx = torch.meshgrid(r, r, indexing="ij")
    return torch.stack([gy, gx, 1 - gy, 1 - gx], -1)[None]

class SlotAttention(nn.Module):
    def __init__(self, iters=ITERS, k=K, d=D):
        super().__init__()
        self.iters, self.k, self.scale = iters, k, d ** -0.5
        self.mu = nn.Parameter(torch.randn(1, 1, d))
        self.log_sigma = nn.Parameter(torch.zeros(1, 1, d))
        self.q, self.kv = nn.Linear(d, d, bias=False), nn.Linear(d, 2 * d, bias=False)
        self.gru = nn.GRUCell(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 128), nn.ReLU(), nn.Linear(128, d))
        self.n_in, self.n_s, self.n_m = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(0)

    def forward(self, inputs):
        b, n, d = inputs.shape
        noise = torch.randn(b, self.k, d, device=inputs.device, generator=self.gen)  # HAZARD: rng
        slots = self.mu + self.log_sigma.exp() * noise
        k, v = self.kv(self.n_in(inputs)).chunk(2, -1)
        for _ in range(self.iters):  # CLEAN: fixed number of attention iterations
            prev = slots
            q = self.q(self.n_s(slots))
            attn = torch.softmax(torch.einsum("bid,bjd->bij", k, q) * self.scale, dim=-1) + 1e-8
            updates = torch.einsum("bij,bid->bjd", attn / attn.sum(1, keepdim=True), v)
            slots = self.gru(updates.reshape(-1, d), prev.reshape(-1, d)).view(b, self.k, d)
            slots = slots + self.mlp(self.n_m(slots))
        return slots

class SlotAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(*[m for i in range(4) for m in (nn.Conv2d(3 if i == 0 else D, D, 5, padding=2), nn.ReLU())])
        self.enc_pos, self.dec_pos = nn.Linear(4, D), nn.Linear(4, D)
        self.mlp = nn.Sequential(nn.LayerNorm(D), nn.Linear(D, D), nn.ReLU(), nn.Linear(D, D))
        self.slot_attn = SlotAttention()
        up = [m for _ in range(4) for m in (nn.ConvTranspose2d(D, D, 5, 2, 2, 1), nn.ReLU())]
        self.dec = nn.Sequential(*up, nn.ConvTranspose2d(D, 4, 3, 1, 1))
        self.register_buffer("grid_enc", build_grid(RES))
        self.register_buffer("grid_dec", build_grid(8))

    def forward(self, img):
        b = img.shape[0]
        x = self.enc(img).permute(0, 2, 3, 1) + self.enc_pos(self.grid_enc)
        slots = self.slot_attn(self.mlp(x.reshape(b, -1, D)))
        z = slots.reshape(-1, D)[:, :, None, None].expand(-1, -1, 8, 8) + self.dec_pos(self.grid_dec).permute(0, 3, 1, 2)
        out = self.dec(z).view(b, K, 4, RES, RES)
        rgb, alpha = out[:, :, :3], out[:, :, 3:].softmax(1)
        torch.cuda.empty_cache()  # HAZARD: memory
        return (rgb * alpha).sum(1), alpha.squeeze(2), slots

def fg_ari(true, pred):
    from sklearn.metrics import adjusted_rand_score
    out = []
    for t, p in zip(true, pred):
        fg = t.reshape(-1) > 0
        out.append(adjusted_rand_score(t.reshape(-1)[fg], p.reshape(-1)[fg]))
    return out

def evaluate(model, loader):
    model.cuda().eval()
    static_img = torch.zeros(BATCH, 3, RES, RES, device="cuda")
    with torch.no_grad(), captured() as g:
        log.info("capturing slot-attention eval graph")  # CLEAN: plain string logged once during capture
        recon, masks, slots = model(static_img)
        fg_slots = slots[masks.flatten(2).mean(-1) > 0.02]  # HAZARD: dynamic-shape
    ari = []
    for img, true_masks in loader:
        static_img.copy_(img.cuda(non_blocking=True))  # CLEAN: copy_ into the static input
        g.replay()
        pred = masks.argmax(1).cpu().numpy()  # CLEAN: host read after the replay
        ari.extend(fg_ari(true_masks.numpy(), pred))
    return float(np.mean(ari))

if __name__ == "__main__":
    d = np.load("clevr6_val.npz")
    ds = torch.utils.data.TensorDataset(torch.from_numpy(d["images"]).float() / 255.0, torch.from_numpy(d["masks"]))
    model = SlotAE()
    model.load_state_dict(torch.load("slot_attention_clevr6.pt", map_location="cpu"))
    print("FG-ARI", evaluate(model, torch.utils.data.DataLoader(ds, BATCH, drop_last=True)))
