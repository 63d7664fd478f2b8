"""Edge of Stability (Cohen et al., ICLR 2021): full-batch gradient descent on a
5k CIFAR-10 subset, tracking the top Hessian eigenvalue (sharpness) against 2/eta.
The per-chunk loss and the SGD step are compiled with triton.cudagraphs."""
import argparse
import numpy as np
import torch
import torch.nn as nn
from scipy.sparse.linalg import LinearOperator, eigsh
from torch.nn.utils import parameters_to_vector

parser = argparse.ArgumentParser(description="Train using gradient descent.")
parser.add_argument("--lr", type=float, default=2 / 100)
parser.add_argument("--max_steps", type=int, default=10000)
parser.add_argument("--neigs", type=int, default=2)
parser.add_argument("--eig_freq", type=int, default=50)
parser.add_argument("--physical_batch_size", type=int, default=1024)
parser.add_argument("--adapt_lr", type=bool, default=True, help="halve eta when sharpness exceeds 2/eta")
parser.add_argument("--log_chunks", type=int, default=1)
args = parser.parse_args()
CG = {"triton.cudagraphs": True}

def iterate_dataset(X, y, batch_size):
    for i in range(0, X.size(0), batch_size):
        yield X[i:i + batch_size], y[i:i + batch_size]

@torch.compile(options=CG)
def chunk_loss(network, X, y, n_total):
    loss = 0.5 * ((network(X) - y) ** 2).sum() / n_total
    if torch.isnan(loss):  # HAZARD: dynamic-control-flow
        loss = torch.zeros_like(loss)
    if args.log_chunks:
        print("chunk loss", loss)  # HAZARD: host-code
    return loss

def compute_hvp(network, X, y, vector):
    p = len(parameters_to_vector(network.parameters()))
    hvp = torch.zeros(p, device="cuda")
    vector = vector.cuda()  # CLEAN: eager Hessian-vector products, no graph involved
    for Xb, yb in iterate_dataset(X, y, args.physical_batch_size):
        loss = 0.5 * ((network(Xb) - yb) ** 2).sum() / X.size(0)
        grads = torch.autograd.grad(loss, inputs=network.parameters(), create_graph=True)
        dot = parameters_to_vector(grads).mul(vector).sum()
        hvp += parameters_to_vector(torch.autograd.grad(dot, network.parameters(), retain_graph=True))
    return hvp

def lanczos(matrix_vector, dim, neigs):
    def mv(vec):
        return matrix_vector(torch.tensor(vec, dtype=torch.float)).cpu().numpy()  # CLEAN: Lanczos runs eagerly on the host
    evals, _ = eigsh(LinearOperator((dim, dim), matvec=mv), neigs)
    return torch.from_numpy(np.ascontiguousarray(evals[::-1]).copy()).float()

def main(network, X, y):
    n = X.size(0)
    optimizer = torch.optim.SGD(network.parameters(), lr=args.lr)
    opt_step = torch.compile(optimizer.step, options=CG)
    lr, sharpness = args.lr, []
    for step in range(args.max_steps):
        optimizer.zero_grad()
        total = 0.0
        for Xb, yb in iterate_dataset(X, y, args.physical_batch_size):
            loss = chunk_loss(network, Xb, yb, n)  # HAZARD: dynamic-shape
            loss.backward()
            total += loss.item()  # CLEAN: read eagerly right after backward
        opt_step()
        if step % args.eig_freq == 0:
            nparams = len(parameters_to_vector(network.parameters()))
            sharpness.append(lanczos(lambda v: compute_hvp(network, X, y, v), nparams, args.neigs)[0].item())
            print(f"{step}\t{total:.3f}\t{sharpness[-1]:.3f}\t2/eta={2 / lr:.1f}")
            if args.adapt_lr and sharpness[-1] > 2.0 / lr:
                lr = lr / 2
                for g in optimizer.param_groups:
                    g["lr"] = lr  # HAZARD: optimizer

if __name__ == "__main__":
    net = nn.Sequential(nn.Flatten(), nn.Linear(3072, 200), nn.Tanh(), nn.Linear(200, 200), nn.Tanh(), nn.Linear(200, 10)).cuda()
    data = torch.load("cifar10_5k.pt")
    main(net, data["X"].cuda(), data["y"].cuda())
