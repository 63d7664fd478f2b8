"""Reptile (Nichol, Achiam & Schulman 2018) on 1-D sine regression, after the
reference script; the inner SGD loop on one task is captured once and replayed."""
import argparse
from copy import deepcopy
import numpy as np
import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--ntrain", type=int, default=10)
parser.add_argument("--innerstepsize", type=float, default=0.02)
parser.add_argument("--innerepochs", type=int, default=1)
parser.add_argument("--mbsize", type=int, default=10)
parser.add_argument("--outerstepsize0", type=float, default=0.1)
parser.add_argument("--niterations", type=int, default=30000)
parser.add_argument("--anneal_inner", type=bool, default=True)
parser.add_argument("--fast_outer", type=bool, default=True, help="skip load_state_dict in the outer update")
args = parser.parse_args()

rng = np.random.RandomState(args.seed)
torch.manual_seed(args.seed)
x_all = np.linspace(-5, 5, 50)[:, None]

def gen_task():
    phase, ampl = rng.uniform(low=0, high=2 * np.pi), rng.uniform(0.1, 5)
    return lambda x: np.sin(x + phase) * ampl

class InnerLoop:
    def __init__(self, model):
        self.model = model
        self.static_x = torch.zeros(args.ntrain, 1, device="cuda")
        self.static_y = torch.zeros(args.ntrain, 1, device="cuda")
        self.innerstepsize = args.innerstepsize
        self.x_plot = torch.from_numpy(x_all).float()

    def sgd_step(self, xb, yb):
        self.model.zero_grad(set_to_none=False)  # CLEAN: grads zeroed in place, same buffers at each replay
        loss = (self.model(xb) - yb).pow(2).mean()
        loss.backward()
        lr = self.innerstepsize  # HAZARD: python-scalar
        for p in self.model.parameters():
            p.data.sub_(lr * p.grad.data)  # CLEAN: in-place update keeps the parameter storage
        return loss

    def run(self):
        for _ in range(args.innerepochs):
            perm = rng.permutation(args.ntrain)  # HAZARD: host-code
            for start in range(0, args.ntrain, args.mbsize):
                mb = perm[start:start + args.mbsize]
                loss = self.sgd_step(self.static_x[mb], self.static_y[mb])
        self.curve = self.model(self.x_plot.cuda()).detach()  # HAZARD: pinned-memory
        torch.cuda.empty_cache()  # HAZARD: memory
        return loss

def outer_update(model, weights_before, outerstepsize):
    if args.fast_outer:
        for name, p in model.named_parameters():
            p.data = weights_before[name] + (p.data - weights_before[name]) * outerstepsize  # HAZARD: static-address
    else:
        w_after = model.state_dict()
        model.load_state_dict({n: weights_before[n] + (w_after[n] - weights_before[n]) * outerstepsize for n in weights_before})  # CLEAN: load_state_dict copies into the existing storage

def capture(inner):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            inner.run()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        inner.static_loss = inner.run()
    return g

def main():
    model = nn.Sequential(nn.Linear(1, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1)).cuda()
    inner, graph = InnerLoop(model), None
    for iteration in range(args.niterations):
        weights_before = deepcopy(model.state_dict())
        f = gen_task()
        inds = rng.permutation(len(x_all))[:args.ntrain]  # CLEAN: task data drawn on the host before the replay
        inner.static_x.copy_(torch.from_numpy(x_all[inds]).float())  # CLEAN: copy_ into the static input outside the graph
        inner.static_y.copy_(torch.from_numpy(f(x_all[inds])).float())
        if args.anneal_inner:
            inner.innerstepsize = args.innerstepsize * (1 - iteration / args.niterations)
        if graph is None:
            graph = capture(inner)
        graph.replay()
        outer_update(model, weights_before, args.outerstepsize0 * (1 - iteration / args.niterations))
        if iteration % 1000 == 0:
            print(f"it {iteration} inner loss {inner.static_loss.item():.4f}")  # CLEAN: read after the replay

if __name__ == "__main__":
    main()
