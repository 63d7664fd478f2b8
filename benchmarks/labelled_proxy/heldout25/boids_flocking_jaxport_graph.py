"""Crowd / flock simulation for the open-world ambient life (birds, fish schools), with a
small learned steering MLP. Ported from a JAX prototype: functional parameter dicts,
`tree_map`, a PRNG "key", and a `@jit` decorator that here captures a CUDA graph on the
first call and replays it afterwards. The MLP is refit online to match artist splines.
"""
import functools
import time

import torch

N_BOIDS, RADIUS = 4096, 0.08


def tree_map(fn, *trees):
    return {k: fn(*(t[k] for t in trees)) for k in trees[0]}


def jit(fn):
    """Poor man's jax.jit: warm up, capture once, replay on later calls."""
    graphs = {}

    @functools.wraps(fn)
    def wrapper(self):
        g = graphs.get(id(self))
        if g is None:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    fn(self)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):  # CLEAN: warmed up on a side stream, captured on the graph's own stream
                self.out = fn(self)
            graphs[id(self)] = g
        g.replay()
        return self.out
    return wrapper


def init_params(hidden=64):
    return {"w1": torch.randn(8, hidden, device="cuda") * 0.3, "b1": torch.zeros(hidden, device="cuda"),
            "w2": torch.randn(hidden, 2, device="cuda") * 0.1, "b2": torch.zeros(2, device="cuda")}


def mlp(params, x):
    return torch.tanh(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]


class Flock:
    def __init__(self, seed=0):
        self.params = init_params()
        self.key = torch.Generator(device="cuda").manual_seed(seed)     # jax.random.PRNGKey(seed)
        self.pos = torch.rand(N_BOIDS, 2, device="cuda")
        self.vel = torch.zeros(N_BOIDS, 2, device="cuda")
        self.alive = torch.ones(N_BOIDS, device="cuda")
        self.last_t = time.time()

    @torch.no_grad()
    @jit
    def step(self):
        now = time.time()  # HAZARD: host-code
        dt, self.last_t = min(now - self.last_t, 1 / 30), now
        d = self.pos[:, None] - self.pos[None]
        dist = d.norm(dim=-1) + torch.eye(N_BOIDS, device="cuda")
        near = (dist < RADIUS).float()  # CLEAN: neighbourhood as a dense float mask
        n_near = near.sum(1, keepdim=True).clamp_min(1)
        coh = (near @ self.pos) / n_near - self.pos
        ali = (near @ self.vel) / n_near - self.vel
        sep = (near[..., None] * d / dist[..., None] ** 2).sum(1)
        pairs = torch.nonzero(dist < 0.2 * RADIUS)  # HAZARD: dynamic-shape
        n_alive = int(self.alive.sum())  # HAZARD: host-sync
        wind = torch.randn(N_BOIDS, 2, device="cuda", generator=self.key) * 0.01  # HAZARD: rng
        feats = torch.cat([coh, ali, sep * 1e-3, self.vel], -1)
        acc = mlp(self.params, feats) + wind
        self.vel.copy_((self.vel + dt * acc).clamp(-0.5, 0.5))  # CLEAN: state updated in place
        self.pos.copy_(torch.remainder(self.pos + dt * self.vel, 1.0))
        return self.pos, pairs.shape[0] / max(n_alive, 1)

    def refit(self, targets, lr=1e-2, iters=20):
        params = {k: v.clone().requires_grad_(True) for k, v in self.params.items()}
        for _ in range(iters):
            with torch.enable_grad():
                loss = (mlp(params, targets["feats"]) - targets["acc"]).pow(2).mean()
                grads = torch.autograd.grad(loss, list(params.values()))
            params = tree_map(lambda p, g: (p - lr * g).detach().requires_grad_(True), params, dict(zip(params, grads)))
        self.params = tree_map(lambda p: p.detach(), params)  # HAZARD: static-address


def run(flock, renderer, frames=10000):
    for f in range(frames):
        pos, crowding = flock.step()
        renderer.draw_points(pos.cpu().numpy())  # CLEAN: eager readback after replay
        if f % 600 == 599:
            flock.refit(renderer.artist_targets())
