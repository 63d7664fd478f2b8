"""Neural radiance caching (Mueller et al. 2021 style) for a real-time path tracer.

Every frame the tracer hands over a fixed-size batch of training records
(position, normal/roughness/albedo, target radiance). A multiresolution hash-grid
encoding and a tiny MLP are trained online; both are graphed together with
torch.cuda.make_graphed_callables so each frame is a forward and a backward replay.
"""
import torch
import torch.nn as nn

N_TRAIN = 1 << 14
N_LEVELS, F_PER_LEVEL, LOG2_T = 8, 2, 15


class HashGridEncoding(nn.Module):
    def __init__(self, base_res=16, growth=1.5):
        super().__init__()
        self.tables = nn.Parameter(torch.empty(N_LEVELS, 1 << LOG2_T, F_PER_LEVEL).uniform_(-1e-4, 1e-4))
        self.register_buffer("res", torch.tensor([int(base_res * growth ** l) for l in range(N_LEVELS)], dtype=torch.float32))  # CLEAN: built in __init__, outside any graph
        self.register_buffer("primes", torch.tensor([1, 2654435761, 805459861], dtype=torch.int64))
        self.active_levels = 2  # grown by the trainer (progressive training)

    def forward(self, pos):
        n_active = self.active_levels  # HAZARD: python-scalar
        feats = []
        for l in range(N_LEVELS):
            cell = (pos * self.res[l]).floor().long()
            idx = (cell * self.primes).sum(-1) % (1 << LOG2_T)
            f = self.tables[l][idx]
            feats.append(f if l < n_active else torch.zeros_like(f))
        return torch.cat(feats, -1)


class RadianceMLP(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        in_dim = N_LEVELS * F_PER_LEVEL + 6
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                 nn.ReLU(), nn.Linear(hidden, 3))

    def forward(self, enc, aux):
        rgb = self.net(torch.cat([enc, aux], -1))
        if torch.isinf(rgb).any():  # HAZARD: dynamic-control-flow
            rgb = torch.nan_to_num(rgb, posinf=1e4, neginf=-1e4)
        return rgb


class RadianceCache:
    def __init__(self):
        self.enc = HashGridEncoding().cuda()
        self.mlp = RadianceMLP().cuda()
        params = list(self.enc.parameters()) + list(self.mlp.parameters())
        self.opt = torch.optim.Adam(params, lr=1e-2, betas=(0.9, 0.99), eps=1e-15)
        self.frame, self.stats = 0, {}
        self.enc.register_forward_pre_hook(self._wrap_positions)  # HAZARD: api-misuse

    def _wrap_positions(self, mod, args):
        return (args[0].remainder(1.0),)

    def _record(self, mod, inp, out):
        self.stats["rgb_mean"] = out.detach().mean()

    def build_graphs(self):
        pos = torch.rand(N_TRAIN, 3, device="cuda")
        aux = torch.rand(N_TRAIN, 6, device="cuda")
        enc_out = torch.rand(N_TRAIN, N_LEVELS * F_PER_LEVEL, device="cuda", requires_grad=True)
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            self.enc, self.mlp = torch.cuda.make_graphed_callables((self.enc, self.mlp), ((pos,), (enc_out, aux)))
        self.mlp.register_forward_hook(self._record)  # CLEAN: hook registered after graphing

    def train_frame(self, pos, aux, target):
        with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # CLEAN: cache disabled, around replays only
            rgb = self.mlp(self.enc(pos), aux)
        loss = ((rgb.float() - target) ** 2 / (rgb.detach().float() ** 2 + 1e-2)).mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()  # CLEAN: eager optimizer step outside the graphed callables
        self.frame += 1
        if self.frame % 64 == 0 and self.enc.active_levels < N_LEVELS:
            self.enc.active_levels += 1
        return loss.item()


if __name__ == "__main__":
    cache = RadianceCache()
    cache.build_graphs()
    for frame in range(600):
        pos = torch.rand(N_TRAIN, 3, device="cuda")
        aux = torch.rand(N_TRAIN, 6, device="cuda")
        target = torch.rand(N_TRAIN, 3, device="cuda")
        loss = cache.train_frame(pos, aux, target)
        if frame % 100 == 0:
            print(f"frame {frame} rel-L2 {loss:.4f} levels {cache.enc.active_levels}")
