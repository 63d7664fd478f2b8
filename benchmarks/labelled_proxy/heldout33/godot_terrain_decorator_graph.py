"""GDExtension-side Python helper (via godot-python) for a procedural terrain generator.

Each chunk request from Godot calls `generate_chunk`; the heightmap network is wrapped in a
small `@cuda_graph_cached` decorator copied from a gist, which captures on the first call.
"""
import functools

import torch
import torch.nn as nn
import torch.nn.functional as F

CHUNK = 64
WORLD = {"seed": 42, "octaves": 4, "roughness": 0.5}


def cuda_graph_cached(fn):
    """Capture fn(*static_args) into a CUDA graph on first call, replay afterwards."""
    state = {}

    @functools.wraps(fn)
    def wrapper(*args):
        if "graph" not in state:
            state["inputs"] = [a.clone() for a in args]
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):  # HAZARD: api-misuse
                state["out"] = fn(*state["inputs"])
            state["graph"] = g
        for dst, src in zip(state["inputs"], args):
            dst.copy_(src)  # CLEAN: copy_ into the captured inputs
        state["graph"].replay()
        return state["out"].clone()  # CLEAN: clone before returning to Godot
    return wrapper


class HeightNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(3, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 1))


net = HeightNet().cuda().eval()


@cuda_graph_cached
@torch.no_grad()
def heightmap(coords, chunk_origin):
    offset = int(chunk_origin.sum())  # HAZARD: host-sync
    torch.manual_seed(WORLD["seed"] + offset)  # HAZARD: rng
    h = torch.zeros(coords.shape[0], device=coords.device)
    amp, freq = 1.0, 1.0
    for _ in range(WORLD["octaves"]):  # HAZARD: python-scalar
        phase = torch.rand(1, device=coords.device)  # CLEAN: default CUDA generator
        p = torch.cat([(coords + chunk_origin) * freq, phase.expand(coords.shape[0], 1)], -1)
        h = h + amp * net.mlp(p).squeeze(-1)
        amp *= WORLD["roughness"]  # HAZARD: python-scalar
        freq *= 2.0
    torch.cuda.empty_cache()  # HAZARD: memory
    return F.avg_pool1d(h.view(1, 1, -1), 3, 1, 1).view(CHUNK, CHUNK)


_grid = torch.stack(torch.meshgrid(torch.arange(CHUNK), torch.arange(CHUNK), indexing="ij"), -1)
GRID = _grid.view(-1, 2).float().cuda() / CHUNK


def generate_chunk(cx: int, cz: int):
    origin = torch.tensor([[cx, cz]], dtype=torch.float32, device="cuda")  # CLEAN: eager, before the replay
    hm = heightmap(GRID, origin)
    return hm.cpu().numpy().astype("float32").tobytes()  # CLEAN: host copy of the cloned output


def set_world(seed: int, octaves: int, roughness: float):
    WORLD.update(seed=seed, octaves=octaves, roughness=roughness)
