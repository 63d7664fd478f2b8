"""Graph-network surrogate for AC optimal power flow (OPF) on a fixed transmission grid.

The physics-informed training step is captured with CUDAGraph.capture_begin/capture_end on
a side stream and replayed; the real-time dispatch advisor is compiled with
torch.compile(mode="reduce-overhead").

    python power_grid_opf_graph.py train --case case118.npz --steps 50000
    python power_grid_opf_graph.py advise --ckpt opf.pt --case case118.npz --hours 24
"""
import argparse
import json
import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("opf")


@dataclass
class OPFConfig:
    hidden: int = 128
    layers: int = 6
    batch: int = 256
    lr: float = 5e-3
    steps: int = 50_000
    load_scale: float = 1.0
    balance_w: float = 10.0
    seed: int = 7


def parse_args():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--case", default="case118.npz")
    t.add_argument("--steps", type=int, default=50_000)
    t.add_argument("--ckpt", default="opf.pt")
    t.add_argument("--outage-every", type=int, default=10_000)
    a = sub.add_parser("advise")
    a.add_argument("--ckpt", default="opf.pt")
    a.add_argument("--case", default="case118.npz")
    a.add_argument("--hours", type=int, default=24)
    return p.parse_args()


# ----------------------------------------------------------------------------- grid model (host)

class GridCase:
    def __init__(self, path):
        z = np.load(path)
        self.n_bus = int(z["n_bus"])
        self.lines = z["lines"].astype(np.int64)          # (L, 2) from/to bus
        self.r = z["r"].astype(np.float32)
        self.x = z["x"].astype(np.float32)
        self.rate = z["rate"].astype(np.float32)          # line limits (p.u.)
        self.gen_bus = z["gen_bus"].astype(np.int64)
        self.pmax = z["pmax"].astype(np.float32)
        self.cost = z["cost"].astype(np.float32)          # linear cost per generator
        self.base_load = z["load"].astype(np.float32)     # (n_bus,) active load p.u.
        self.in_service = np.ones(len(self.lines), dtype=bool)

    def ybus(self):
        n = self.n_bus
        g = np.zeros((n, n), dtype=np.float32)
        b = np.zeros((n, n), dtype=np.float32)
        for k, (i, j) in enumerate(self.lines):
            if not self.in_service[k]:
                continue
            z2 = self.r[k] ** 2 + self.x[k] ** 2
            gk, bk = self.r[k] / z2, -self.x[k] / z2
            g[i, j] -= gk; g[j, i] -= gk; g[i, i] += gk; g[j, j] += gk
            b[i, j] -= bk; b[j, i] -= bk; b[i, i] += bk; b[j, j] += bk
        return g, b

    def adjacency(self):
        a = np.eye(self.n_bus, dtype=np.float32)
        for k, (i, j) in enumerate(self.lines):
            if self.in_service[k]:
                a[i, j] = a[j, i] = 1.0
        d = a.sum(1)
        return a / np.sqrt(np.outer(d, d))

    def trip_random_line(self, rng):
        k = int(rng.integers(len(self.lines)))  # CLEAN: host RNG choosing an outage, outside the capture
        self.in_service[k] = False
        return k

    def scenarios(self, n, rng, scale=1.0):
        noise = rng.normal(1.0, 0.1, size=(n, self.n_bus)).astype(np.float32)  # CLEAN: NumPy RNG for load scenarios, host side
        return np.clip(self.base_load[None] * noise * scale, 0.0, None)


# ----------------------------------------------------------------------------- network

class GCNLayer(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, h, adj):
        return h + F.silu(self.norm(self.lin(adj @ h)))


class OPFNet(nn.Module):
    def __init__(self, n_bus, n_gen, gen_bus, cfg):
        super().__init__()
        self.inp = nn.Linear(2, cfg.hidden)
        self.layers = nn.ModuleList([GCNLayer(cfg.hidden) for _ in range(cfg.layers)])
        self.gen_out = nn.Linear(cfg.hidden, 1)
        self.ang_out = nn.Linear(cfg.hidden, 1)
        self.register_buffer("gen_bus", torch.as_tensor(gen_bus))
        self.n_bus = n_bus

    def forward(self, load, adj, pmax):
        is_gen = torch.zeros(self.n_bus, device=load.device).index_fill_(0, self.gen_bus, 1.0)  # CLEAN: index_fill_ with a CUDA index buffer
        h = self.inp(torch.stack([load, is_gen.expand_as(load)], -1))
        for layer in self.layers:
            h = layer(h, adj)
        pg = torch.sigmoid(self.gen_out(h[:, self.gen_bus]).squeeze(-1)) * pmax  # CLEAN: gather with a registered CUDA index buffer
        theta = self.ang_out(h).squeeze(-1)
        theta = theta - theta[:, :1]
        return pg, theta


# ----------------------------------------------------------------------------- captured training step

class OPFTrainer:
    def __init__(self, case: GridCase, cfg: OPFConfig, dev):
        self.case = case
        self.cfg = cfg
        self.dev = dev
        self.net = OPFNet(case.n_bus, len(case.gen_bus), case.gen_bus, cfg).to(dev)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=cfg.lr, momentum=0.9, nesterov=True)
        self.load_scale = cfg.load_scale
        self.epoch = 0
        self.static_load = torch.zeros(cfg.batch, case.n_bus, device=dev)
        self.adj = torch.from_numpy(case.adjacency()).to(dev)
        self.pmax = torch.from_numpy(case.pmax).to(dev)
        self.cost = torch.from_numpy(case.cost).to(dev)
        self.rate = torch.from_numpy(case.rate).to(dev)
        self.lines = torch.from_numpy(case.lines).to(dev)
        self.b_line = torch.from_numpy(-case.x / (case.r ** 2 + case.x ** 2)).to(dev)
        self.stream = torch.cuda.Stream()
        self.flow_stream = torch.cuda.Stream()
        self.g = torch.cuda.CUDAGraph()
        self.viol_log = []

    def physics_loss(self, load, pg, theta):
        gm, bm = self.case.ybus()
        bmat = torch.from_numpy(bm).to(self.dev)  # HAZARD: pinned-memory
        inj = torch.zeros_like(load).index_add_(1, self.net.gen_bus, pg) - load
        p_calc = -(theta @ bmat.T)
        balance = (p_calc - inj).pow(2).mean()
        with torch.cuda.stream(self.flow_stream):  # HAZARD: stream
            flow = self.b_line * (theta[:, self.lines[:, 0]] - theta[:, self.lines[:, 1]])
        viol = F.relu(flow.abs() - self.rate)
        n_viol = (viol > 0).sum().item()  # HAZARD: host-sync
        self.viol_log.append(n_viol)
        if viol.sum() > 0:  # HAZARD: dynamic-control-flow
            balance = balance + viol.pow(2).mean()
        return balance, viol

    def step(self):
        torch.cuda.manual_seed(self.cfg.seed + self.epoch)  # HAZARD: rng
        scale = self.load_scale  # HAZARD: python-scalar
        load = self.static_load * scale * (1.0 + 0.02 * torch.randn_like(self.static_load))  # CLEAN: default CUDA generator, capturable
        pg, theta = self.net(load, self.adj, self.pmax)
        gen_cost = (pg * self.cost).sum(-1).mean()
        balance, viol = self.physics_loss(load, pg, theta)
        loss = gen_cost + self.cfg.balance_w * balance
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.opt.step()  # CLEAN: plain SGD has no host-side step state
        return loss.detach(), viol.detach().amax()

    def capture(self):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            for _ in range(3):
                self.step()
            self.g.capture_begin()  # HAZARD: api-misuse
            self.static_loss, self.static_viol = self.step()
            self.g.capture_end()
        torch.cuda.current_stream().wait_stream(self.stream)

    def apply_outage(self, rng):
        k = self.case.trip_random_line(rng)
        self.adj.copy_(torch.from_numpy(self.case.adjacency()))  # CLEAN: adjacency refreshed in place with copy_
        log.warning("line %d tripped; re-capturing the training step", k)
        self.capture()

    def replay(self, loads_cpu):
        self.static_load.copy_(loads_cpu, non_blocking=True)  # CLEAN: pinned copy_ into the static input
        self.g.replay()
        return self.static_loss, self.static_viol


def train(args):
    cfg = OPFConfig(steps=args.steps)
    dev = torch.device("cuda")
    case = GridCase(args.case)
    rng = np.random.default_rng(cfg.seed)
    trainer = OPFTrainer(case, cfg, dev)
    trainer.capture()
    t0 = time.time()  # CLEAN: wall clock in the driver loop
    for it in range(cfg.steps):
        if it and it % args.outage_every == 0:
            trainer.apply_outage(rng)
        if it % 5000 == 0:
            trainer.epoch += 1
            trainer.load_scale = 1.0 + 0.05 * trainer.epoch
        if it in (20_000, 40_000):
            for g in trainer.opt.param_groups:
                g["lr"] *= 0.3  # HAZARD: optimizer
        loads = torch.from_numpy(case.scenarios(cfg.batch, rng, trainer.load_scale)).pin_memory()
        loss, viol = trainer.replay(loads)
        if it % 500 == 0:
            print(f"it {it:6d} loss {loss.item():.4f} max overload {viol.item():.3f} p.u. "  # CLEAN: host reads after the replay
                  f"({(time.time() - t0) / (it + 1) * 1e3:.2f} ms/it)")
    torch.save({"net": trainer.net.state_dict(), "cfg": cfg.__dict__}, args.ckpt)


# ----------------------------------------------------------------------------- real-time advisor (compiled)

class DispatchAdvisor(nn.Module):
    def __init__(self, net, case, dev):
        super().__init__()
        self.net = net
        self.register_buffer("adj", torch.from_numpy(case.adjacency()))
        self.register_buffer("pmax", torch.from_numpy(case.pmax))
        self.register_buffer("rate", torch.from_numpy(case.rate))
        self.register_buffer("lines", torch.from_numpy(case.lines))
        self.register_buffer("b_line", torch.from_numpy(-case.x / (case.r ** 2 + case.x ** 2)))

    def forward(self, load):
        pg, theta = self.net(load, self.adj, self.pmax)
        flows = self.b_line * (theta[:, self.lines[:, 0]] - theta[:, self.lines[:, 1]])
        loading = flows.abs() / self.rate
        log.warning("worst line loading %s", loading.max())  # HAZARD: host-code
        overloaded = loading[loading > 1.0]  # HAZARD: dynamic-shape
        margin = torch.where(loading > 1.0, loading - 1.0, torch.zeros_like(loading))  # CLEAN: three-argument where
        return pg, loading, margin.sum(-1) + 0.0 * overloaded.sum()


def advise(args):
    dev = torch.device("cuda")
    blob = torch.load(args.ckpt, map_location="cpu")
    cfg = OPFConfig(**blob["cfg"])
    case = GridCase(args.case)
    net = OPFNet(case.n_bus, len(case.gen_bus), case.gen_bus, cfg)
    net.load_state_dict(blob["net"])
    adv = DispatchAdvisor(net, case, dev).to(dev).eval()
    run = torch.compile(adv, mode="reduce-overhead")
    rng = np.random.default_rng(0)
    plan, history = [], []
    with torch.no_grad():
        for hour in range(args.hours):
            shape = 0.8 + 0.3 * math.sin(math.pi * (hour - 6) / 12)
            loads = torch.from_numpy(case.scenarios(1, rng, shape)).to(dev)
            pg, loading, margin = run(loads)
            history.append(loading)  # HAZARD: static-address
            pg_host = pg[0].cpu().numpy()  # CLEAN: read right after the call, before the next compiled call
            worst = float(loading.max())  # CLEAN: host read outside the compiled advisor
            plan.append({"hour": hour, "dispatch": pg_host.round(3).tolist(), "worst_loading": worst,
                         "overload_margin": float(margin.item())})
            if worst > 1.0:
                log.info("hour %d: congestion, worst loading %.2f", hour, worst)
    print(json.dumps(plan[:3], indent=1))
    with open("dispatch_plan.json", "w") as f:
        json.dump(plan, f)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    a = parse_args()
    train(a) if a.cmd == "train" else advise(a)
