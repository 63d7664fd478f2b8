"""Shot quality (make probability / expected points) from player tracking at the moment of
release: 10 players (x, y, vx, vy, is_defense), ball (x, y, z), shooter position and the
shot type. Encoder and head are graphed with torch.cuda.make_graphed_callables.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

B, D, N_TYPES = 256, 128, 6
FLIP_P = torch.tensor([-1.0, 1.0, -1.0, 1.0, 1.0])       # mirror the half court along x
FLIP_B = torch.tensor([-1.0, 1.0, 1.0])


class PlayerEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Sequential(nn.Linear(7, D), nn.ReLU(), nn.Linear(D, D))
        self.attn = nn.Linear(D, 1)
        self.ctx = nn.Linear(5, D)
        self.register_buffer("flip_p", FLIP_P.view(1, 1, 5))
        self.register_buffer("flip_b", FLIP_B.view(1, 3))

    def forward(self, players, ball, shooter_xy):
        if self.training and random.random() < 0.5:  # HAZARD: host-code
            players, ball, shooter_xy = players * self.flip_p, ball * self.flip_b, shooter_xy * self.flip_b[:, :2]
        d_xy = players[..., :2] - shooter_xy[:, None]
        dist = d_xy.norm(dim=-1)                                        # (B, 10)
        defenders = dist[players[..., 4] == 1].view(-1, 5)  # HAZARD: dynamic-shape
        closest = defenders.min(1).values
        open_mate = dist.masked_fill(players[..., 4] == 1, 1e3).min(1).values  # CLEAN: masked_fill keeps a fixed shape
        h = self.embed(torch.cat([players, d_xy], -1))
        pooled = (torch.softmax(self.attn(h), dim=1) * h).sum(1)
        return pooled + self.ctx(torch.cat([ball, closest[:, None], open_mate[:, None]], -1))


class MakeHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.type_emb = nn.Embedding(N_TYPES, D)
        self.mlp = nn.Sequential(nn.Linear(D, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, z, shot_type):
        return self.mlp(z + self.type_emb(shot_type)).squeeze(-1)


def sample_inputs(device="cuda"):
    players = torch.randn(B, 10, 5, device=device)
    players[..., 4] = (torch.arange(10, device=device) >= 5).float()
    return players, torch.randn(B, 3, device=device), torch.randn(B, 2, device=device)


def graph_models(enc, head, device="cuda"):
    z = torch.randn(B, D, device=device, requires_grad=True)
    st = torch.randint(0, N_TYPES, (B,), device=device)
    with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
        return torch.cuda.make_graphed_callables((enc, head), (sample_inputs(device), (z, st)))


def log_attention(module, inputs, output):
    module.last_norm = output.detach().norm(dim=-1).mean()


def train(loader, val, epochs=10, device="cuda"):
    enc, head = PlayerEncoder().to(device), MakeHead().to(device)
    g_enc, g_head = graph_models(enc, head, device)
    enc.register_forward_hook(log_attention)  # CLEAN: hook registered after graphing
    opt = torch.optim.Adam(list(enc.parameters()) + list(head.parameters()), lr=1e-3)
    for ep in range(epochs):
        enc.train()
        head.train()
        for players, ball, shooter, st, made, pts in loader:          # batches of 256, drop_last=True
            logit = g_head(g_enc(players, ball, shooter), shot_type=st)  # HAZARD: api-misuse
            loss = F.binary_cross_entropy_with_logits(logit, made)
            opt.zero_grad(set_to_none=False)
            loss.backward()
            opt.step()
        enc.eval()
        head.eval()
        with torch.no_grad():
            vp, vb, vs, vst, vmade, vpts = val
            xpts = torch.sigmoid(g_head(g_enc(vp, vb, vs), vst)) * vpts  # CLEAN: eval mode, the graphed callables run the eager forward
            print(f"epoch {ep}: loss {loss.item():.4f}  xPts/shot {xpts.mean().item():.3f}  actual {(vmade * vpts).mean().item():.3f}")


if __name__ == "__main__":
    from tracking_io import load_shots

    train_loader, val_set = load_shots("sportvu_2015_16.parquet", batch=B, device="cuda")
    train(train_loader, val_set)
