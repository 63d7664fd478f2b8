"""SPOTER-style isolated sign-language recognition (WLASL100) from 2-D pose keypoints.

Pose encoder + class-query decoder. The assistant's diff graphs both with
`torch.cuda.make_graphed_callables` in one call and keeps the eager optimizer.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

T, J, D = 204, 54, 108
HAND_JOINTS = list(range(12, 54))  # 21 + 21 hand landmarks after the body joints


def attn_block(q_in, kv_in, proj_q, proj_kv, out, heads=9):
    b, nq, d = q_in.shape
    q = proj_q(q_in).view(b, nq, heads, -1).transpose(1, 2)
    k, v = proj_kv(kv_in).view(b, kv_in.shape[1], 2, heads, -1).permute(2, 0, 3, 1, 4)
    return out(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, nq, d))


class PoseEncoder(nn.Module):
    def __init__(self, layers=6, frame_drop=0.1, seed=0):
        super().__init__()
        self.pos = nn.Parameter(torch.randn(1, T, D) * 0.02)
        self.q = nn.ModuleList(nn.Linear(D, D) for _ in range(layers))
        self.kv = nn.ModuleList(nn.Linear(D, 2 * D) for _ in range(layers))
        self.o = nn.ModuleList(nn.Linear(D, D) for _ in range(layers))
        self.ff = nn.ModuleList(nn.Sequential(nn.Linear(D, 2048), nn.ReLU(), nn.Linear(2048, D)) for _ in range(layers))
        self.ln = nn.ModuleList(nn.LayerNorm(D) for _ in range(2 * layers))
        self.frame_drop = frame_drop
        self.drop_gen = torch.Generator(device="cuda").manual_seed(seed)

    def forward(self, kp):  # kp: (B, T, J, 2), normalised to the signing space
        hands = kp[:, :, HAND_JOINTS]  # HAZARD: host-sync
        kp = torch.cat([kp[:, :, :12], hands * 1.2], 2)
        theta = np.deg2rad(np.random.uniform(-13, 13))  # HAZARD: host-code
        rot = kp.new_tensor([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
        x = (kp @ rot).flatten(2) + self.pos
        keep = torch.bernoulli(torch.full(x.shape[:2], 1 - self.frame_drop, device=x.device), generator=self.drop_gen)  # HAZARD: rng
        x = x * keep.unsqueeze(-1)
        for i in range(len(self.q)):
            x = self.ln[2 * i](x + attn_block(x, x, self.q[i], self.kv[i], self.o[i]))
            x = self.ln[2 * i + 1](x + self.ff[i](x))
        return x


class ClassQueryDecoder(nn.Module):
    def __init__(self, n_classes=100):
        super().__init__()
        self.query = nn.Parameter(torch.randn(1, 1, D))
        self.q, self.kv, self.o = nn.Linear(D, D), nn.Linear(D, 2 * D), nn.Linear(D, D)
        self.ln = nn.LayerNorm(D)
        self.cls = nn.Linear(D, n_classes)

    def forward(self, memory, class_query=None):
        q = self.query.expand(memory.shape[0], -1, -1) if class_query is None else class_query
        h = self.ln(q + attn_block(q, memory, self.q, self.kv, self.o))
        return self.cls(h[:, 0])


def train(loader, val_loader, epochs=100, batch=24):
    enc, dec = PoseEncoder().cuda().train(), ClassQueryDecoder().cuda().train()
    s_kp = torch.randn(batch, T, J, 2, device="cuda")
    s_mem = torch.randn(batch, T, D, device="cuda", requires_grad=True)
    g_enc, g_dec = torch.cuda.make_graphed_callables((enc, dec), ((s_kp,), (s_mem,)))
    opt = torch.optim.SGD(list(enc.parameters()) + list(dec.parameters()), lr=1e-3, momentum=0.9)
    query_bank = dec.query.detach()
    for epoch in range(epochs):
        enc.train(), dec.train()
        for kp, y in loader:  # fixed T (padded / resampled to 204 frames), drop_last=True
            mem = g_enc(kp.cuda(non_blocking=True))
            logits = g_dec(mem, class_query=query_bank.expand(batch, -1, -1))  # HAZARD: api-misuse
            loss = F.cross_entropy(logits, y.cuda(non_blocking=True))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        acc = validate(enc, dec, g_enc, g_dec, val_loader)
        print(f"epoch {epoch} top-1 {acc:.3f}")


@torch.no_grad()
def validate(enc, dec, g_enc, g_dec, val_loader):
    enc.eval(), dec.eval()
    correct = total = 0
    for kp, y in val_loader:
        logits = g_dec(g_enc(kp.cuda()))  # CLEAN: eval mode runs the original forwards
        correct += (logits.argmax(1).cpu() == y).sum().item()  # CLEAN: host read outside any graph
        total += y.numel()
    monitor = enc.register_forward_hook(lambda m, i, o: None)  # CLEAN: hook registered after graphing
    monitor.remove()
    return correct / total
