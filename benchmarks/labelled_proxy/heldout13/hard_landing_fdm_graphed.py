"""Hard-landing risk from flight-data-monitoring (FDM) recordings: the last 60 s
before touchdown (8 Hz, 24 parameters) -> probability that the touchdown vertical
acceleration exceeds the airline's threshold. Encoder, masked attention pooling
and risk head are graphed together in one pool.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

N_PARAM, T = 24, 480


class FDMEncoder(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.conv = nn.Conv1d(N_PARAM, d, 5, padding=2)
        self.gru = nn.GRU(d, d, batch_first=True)
        self.noise_gen = torch.Generator(device="cuda")
        self.noise_gen.manual_seed(3)

    def forward(self, x):
        if self.training:
            x = x + 0.02 * torch.randn(x.shape, device=x.device, generator=self.noise_gen)  # HAZARD: rng
        h = torch.relu(self.conv(x)).transpose(1, 2)
        out, _ = self.gru(h)
        return out


class MaskedAttentionPool(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.score = nn.Linear(d, 1)

    def forward(self, seq, valid):
        last = int(valid.sum(1).max())  # HAZARD: host-sync
        seq, valid = seq[:, :last], valid[:, :last]
        s = self.score(seq).squeeze(-1).masked_fill(~valid, float("-inf"))  # CLEAN: masked_fill keeps the shape
        return (torch.softmax(s, -1).unsqueeze(-1) * seq).sum(1)


class RiskHead(nn.Module):
    def __init__(self, field_elev_ft: np.ndarray, d=64):
        super().__init__()
        self.elev_np = field_elev_ft.astype(np.float32)  # per runway id, from the nav database
        self.fc = nn.Sequential(nn.Linear(d + 1, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, z, runway):
        elev = torch.from_numpy(self.elev_np).cuda()  # HAZARD: pinned-memory
        e = elev.gather(0, runway).unsqueeze(-1) / 10_000.0
        return self.fc(torch.cat([z, e], -1)).squeeze(-1)


def grad_probe(module, grad_in, grad_out):
    module.last_grad_norm = grad_out[0].norm()


def graph_modules(enc, pooler, head, B=32, device="cuda"):
    enc.register_full_backward_hook(grad_probe)  # HAZARD: api-misuse
    x = torch.randn(B, N_PARAM, T, device=device)
    seq = torch.randn(B, T, 64, device=device, requires_grad=True)
    valid = torch.ones(B, T, dtype=torch.bool, device=device)
    z = torch.randn(B, 64, device=device, requires_grad=True)
    runway = torch.zeros(B, dtype=torch.long, device=device)
    pool = torch.cuda.graph_pool_handle()
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):  # CLEAN: autocast without its cast cache
        return torch.cuda.make_graphed_callables(
            (enc, pooler, head), ((x,), (seq, valid), (z, runway)), pool=pool)


def train(field_elev_ft, epochs=3, device="cuda"):
    enc, pooler, head = FDMEncoder().to(device), MaskedAttentionPool().to(device), RiskHead(field_elev_ft).to(device)
    g_enc, g_pool, g_head = graph_modules(enc, pooler, head, device=device)
    head.register_forward_hook(lambda m, i, o: None)  # CLEAN: hook registered after graphing
    opt = torch.optim.Adam([p for m in (enc, pooler, head) for p in m.parameters()], lr=5e-4)
    for epoch in range(epochs):
        for _ in range(200):
            x = torch.randn(32, N_PARAM, T, device=device)
            valid = torch.rand(32, T, device=device) > 0.1  # dropouts in the QAR recording
            runway = torch.randint(0, len(field_elev_ft), (32,), device=device)
            vz_g = 1.0 + torch.rand(32, device=device)
            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
                logit = g_head(g_pool(g_enc(x), valid), runway)
            loss = F.binary_cross_entropy_with_logits(logit.float(), (vz_g > 1.8).float())
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch}: {loss.item():.4f}")


if __name__ == "__main__":
    train(np.random.uniform(0, 8000, size=300))
