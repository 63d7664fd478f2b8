"""Felsenstein pruning: site log-likelihoods of a fixed tree under GTR+Gamma.

Phylogenetics code (ex-BEAGLE/C user).  Transition matrices are built from a
precomputed eigen-decomposition; the post-order pass is captured through the
lab's `graph_capture()` context manager and replayed for every alignment block.
"""
import contextlib
import numpy as np
import torch

dev = torch.device("cuda")
N_SITES = 1 << 16
N_CAT = 4
POSTORDER = [(0, 1, 5), (2, 3, 6), (5, 6, 7), (4, 7, 8)]    # (child_a, child_b, parent)
ROOT = 8


@contextlib.contextmanager
def graph_capture(graph):
    stream = torch.cuda.current_stream()
    with torch.cuda.graph(graph, stream=stream):  # HAZARD: stream
        yield graph
    torch.cuda.synchronize()


class Pruner:
    def __init__(self, Q_np, pi_np, rates_np, blen):
        evals, evecs = np.linalg.eig(Q_np)
        self.evals = torch.tensor(evals.real, dtype=torch.float64, device=dev)
        self.V = torch.tensor(evecs.real, dtype=torch.float64, device=dev)
        self.Vinv = torch.linalg.inv(self.V)
        self.pi = torch.tensor(pi_np, dtype=torch.float64, device=dev)
        self.rates = torch.tensor(rates_np, dtype=torch.float64, device=dev)
        self.branch_len = list(blen)
        self.tips = torch.zeros(5, N_SITES, 4, dtype=torch.float64, device=dev)
        self.partials = torch.zeros(9, N_CAT, N_SITES, 4, dtype=torch.float64, device=dev)
        self.site_ll = torch.zeros(N_SITES, dtype=torch.float64, device=dev)
        self.graph = torch.cuda.CUDAGraph()

    def pmat(self, node):
        t = self.branch_len[node]  # HAZARD: python-scalar
        ex = torch.exp(self.evals[None, :] * self.rates[:, None] * t)
        return torch.einsum("ij,cj,jk->cik", self.V, ex, self.Vinv)

    def prune(self):
        self.partials[:5] = self.tips[:, None]
        log_scale = torch.zeros(N_SITES, dtype=torch.float64, device=dev)
        for a, b, p in POSTORDER:
            La = torch.einsum("cik,cnk->cni", self.pmat(a), self.partials[a])
            Lb = torch.einsum("cik,cnk->cni", self.pmat(b), self.partials[b])
            L = La * Lb
            if L.min() < 1e-30:  # HAZARD: dynamic-control-flow
                m = L.amax(dim=(0, 2), keepdim=True)
                L = L / torch.where(m > 0, m, torch.ones_like(m))  # CLEAN: rescaling with torch.where
                log_scale = log_scale + torch.log(m.squeeze())
            self.partials[p] = L
        root = (self.partials[ROOT] * self.pi).sum(-1)
        torch.cuda.empty_cache()  # HAZARD: memory
        self.site_ll.copy_(torch.logsumexp(torch.log(root) - np.log(N_CAT), dim=0) + log_scale)  # CLEAN: logsumexp is fixed-shape

    def capture(self):
        with graph_capture(self.graph):  # HAZARD: api-misuse
            self.prune()

    def set_branch_lengths(self, blen):
        self.branch_len = list(blen)

    def block_loglik(self, tip_block):
        self.tips.copy_(torch.from_numpy(tip_block))  # CLEAN: copy_ into the static tip buffer
        self.graph.replay()
        return self.site_ll.sum().item()


if __name__ == "__main__":
    Q = np.load("gtr_Q.npy")
    pr = Pruner(Q, np.load("pi.npy"), np.array([0.14, 0.48, 1.01, 2.37]), np.load("blen.npy"))
    pr.capture()
    aln = np.load("alignment_onehot.npy")                 # (n_blocks, 5, N_SITES, 4)
    total = sum(pr.block_loglik(blk) for blk in aln)
    pr.set_branch_lengths(np.load("blen.npy") * 1.1)
    total_scaled = sum(pr.block_loglik(blk) for blk in aln)
    print(total, total_scaled)
