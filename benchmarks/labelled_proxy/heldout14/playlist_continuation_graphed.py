"""'Add more songs like these' for a music streaming app: playlist continuation.

Track tower (id embedding + audio features), a small transformer over the playlist and
a scoring head against sampled candidate tracks. The three modules are graphed together
with torch.cuda.make_graphed_callables for training.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

AUDIO_COLS = [0, 1, 2, 5, 8]    # danceability, energy, valence, tempo, acousticness
D = 128


class TrackTower(nn.Module):
    def __init__(self, n_tracks, p_drop=0.1, seed=0):
        super().__init__()
        self.emb = nn.Embedding(n_tracks, D)
        self.audio = nn.Linear(len(AUDIO_COLS), D)
        self.p_drop = p_drop
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(seed)

    def forward(self, ids, audio):                     # ids [B, T], audio [B, T, 12]
        a = audio[:, :, AUDIO_COLS]  # HAZARD: host-sync
        x = self.emb(ids) + self.audio(a)
        if not self.training:
            return x
        keep = torch.full(ids.shape, 1 - self.p_drop, device=ids.device)
        mask = torch.bernoulli(keep, generator=self.gen)  # HAZARD: rng
        return x * mask[..., None]


class PlaylistEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(D, 4, 256, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x):
        x = F.dropout(x, 0.1, self.training)  # CLEAN: dropout on the default CUDA generator
        return F.normalize(self.enc(x).mean(1), dim=-1)


class ScoreHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(D, D)

    def forward(self, z, cand, temperature=0.07):
        return self.proj(z) @ F.normalize(cand, dim=-1).T / temperature


def graph_modules(tower, encoder, head, B=256, T=50, n_cand=1024):
    ids = torch.randint(0, 1000, (B, T), device="cuda")
    audio = torch.rand(B, T, 12, device="cuda")
    x = torch.randn(B, T, D, device="cuda", requires_grad=True)
    z = torch.randn(B, D, device="cuda", requires_grad=True)
    cand = torch.randn(n_cand, D, device="cuda", requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):  # HAZARD: autocast-cache
        return torch.cuda.make_graphed_callables((tower, encoder, head), ((ids, audio), (x,), (z, cand)))


def train_epoch(tower, encoder, head, loader, opt, temperature):
    tower.train(), encoder.train(), head.train()
    for ids, audio, cand_ids, target in loader:
        x = tower(ids, audio)
        z = encoder(x)
        cand = tower.emb(cand_ids)                      # eager lookup of the sampled candidates
        logits = head(z, cand, temperature=temperature)  # HAZARD: api-misuse
        loss = F.cross_entropy(logits.float(), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


@torch.no_grad()
def recall_at_50(tower, encoder, head, loader):
    tower.eval(), encoder.eval(), head.eval()
    hits, n = 0.0, 0
    for ids, audio, cand_ids, target in loader:
        logits = head(encoder(tower(ids, audio)), tower.emb(cand_ids))  # CLEAN: positional call, eval mode runs the eager forwards
        hits += (logits.topk(50).indices == target[:, None]).any(1).float().sum().item()
        n += ids.shape[0]
    return hits / n


if __name__ == "__main__":
    from data import train_loader, val_loader
    tower, encoder, head = TrackTower(2_000_000).cuda(), PlaylistEncoder().cuda(), ScoreHead().cuda()
    tower, encoder, head = graph_modules(tower, encoder, head)
    opt = torch.optim.Adam([*tower.parameters(), *encoder.parameters(), *head.parameters()], lr=1e-3)
    for epoch, temp in enumerate((0.1, 0.07, 0.05)):
        train_epoch(tower, encoder, head, train_loader, opt, temp)
        print(epoch, recall_at_50(tower, encoder, head, val_loader))
