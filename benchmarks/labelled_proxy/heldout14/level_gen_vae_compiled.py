"""Endless mode of a 2-D platformer: level chunks sampled from a tile-map VAE decoder.

At start-up the module-level decode function is swapped for a reduce-overhead compiled
version; the run loop keeps asking for the next chunks while the player runs.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

TILES = ("air", "ground", "brick", "question", "pipe", "enemy", "coin", "gap")
GAP, ENEMY, COIN = TILES.index("gap"), TILES.index("enemy"), TILES.index("coin")
H, W, Z = 14, 28, 32


class TileDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(Z, 128 * 4 * 7)
        self.up = nn.Sequential(nn.ConvTranspose2d(128, 64, 4, 2, 1), nn.ReLU(),
                                nn.ConvTranspose2d(64, len(TILES), 3, 1, 1))

    def forward(self, z):
        x = self.up(self.fc(z).view(-1, 128, 4, 7))
        return F.interpolate(x, size=(H, W), mode="nearest")


decoder = TileDecoder().cuda().eval()
difficulty = {"temperature": 1.0, "max_gaps": 3}


def decode_level(z):
    temperature = difficulty["temperature"]  # HAZARD: python-scalar
    logits = decoder(z * temperature)
    tiles = logits.argmax(1)
    if (tiles == GAP).sum() > difficulty["max_gaps"] * z.shape[0]:  # HAZARD: dynamic-control-flow
        logits[:, GAP] -= 2.0
        tiles = logits.argmax(1)
    air_probs = torch.stack([logits[:, 0], logits[:, COIN]], -1).softmax(-1).reshape(-1, 2)
    deco = torch.multinomial(air_probs, 1).view_as(tiles)  # CLEAN: multinomial compiles into the graph
    tiles = torch.where((tiles == 0) & (deco == 1), COIN, tiles)
    n_enemies = int((tiles == ENEMY).sum())  # HAZARD: host-sync
    return tiles, n_enemies


@torch.compile   # level-editor preview: default inductor, no CUDA graphs
def preview(z):
    tiles = decoder(z).argmax(1)
    return tiles, int((tiles == ENEMY).sum())  # CLEAN: default torch.compile, no CUDA graphs


def endless_run(n_chunks, batch=8, seed=0):
    global decode_level
    decode_level = torch.compile(decode_level, mode="reduce-overhead")
    gen = torch.Generator(device="cuda").manual_seed(seed)
    chunks, spawned = [], 0
    with torch.no_grad():
        for i in range(n_chunks):
            difficulty["temperature"] = 0.8 + 0.05 * i   # the further you get, the wilder it gets
            z = torch.randn(batch, Z, device="cuda", generator=gen)
            tiles, n_enemies = decode_level(z)
            chunks.append(tiles)  # HAZARD: static-address
            spawned += n_enemies
    return chunks, spawned


def daily_challenge(seed, batch=8):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    with torch.no_grad():
        tiles, _ = decode_level(torch.randn(batch, Z, device="cuda", generator=gen))
        return tiles.clone()  # CLEAN: cloned before the next compiled call


def editor_preview(seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    with torch.no_grad():
        return preview(torch.randn(4, Z, device="cuda", generator=gen))
