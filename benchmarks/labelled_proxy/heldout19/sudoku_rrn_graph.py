"""Recurrent Relational Networks for Sudoku (Palm, Paquet & Winther, NeurIPS 2018).

Weekend re-implementation.  The message-passing solver is captured as a CUDA graph so the
"solve 10k puzzles" benchmark from the paper runs in a few seconds.
"""
import csv
import itertools

import numpy as np
import torch
import torch.nn as nn


def sudoku_edges():
    def peers(i):
        r, c = divmod(i, 9)
        box = [(r // 3 * 3 + a) * 9 + c // 3 * 3 + b for a in range(3) for b in range(3)]
        return set([r * 9 + k for k in range(9)] + [k * 9 + c for k in range(9)] + box) - {i}
    return [(i, j) for i in range(81) for j in sorted(peers(i))]


def mlp(i, h, o):
    return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, o))


class RRN(nn.Module):
    def __init__(self, h=96, n_steps=32):
        super().__init__()
        src, dst = zip(*sudoku_edges())
        self.register_buffer("src", torch.tensor(src))  # CLEAN: edge list turned into a tensor once, in __init__
        self.register_buffer("dst", torch.tensor(dst))
        self.register_buffer("rows", torch.arange(81) // 9)
        self.register_buffer("cols", torch.arange(81) % 9 + 9)
        self.digit = nn.Embedding(10, 16)
        self.row_col = nn.Embedding(18, 16)
        self.inp = mlp(48, h, h)
        self.msg = mlp(2 * h, h, h)
        self.gru = nn.GRUCell(2 * h, h)
        self.out = nn.Linear(h, 9)
        self.n_steps = n_steps

    def forward(self, puzzle):                                  # B x 81, 0 = empty cell
        b = puzzle.shape[0]
        x = torch.cat([self.digit(puzzle), self.row_col(self.rows).expand(b, -1, -1),
                       self.row_col(self.cols).expand(b, -1, -1)], -1)
        x = self.inp(x).reshape(b * 81, -1)
        h = x
        offs = (torch.arange(b, device=puzzle.device) * 81)[:, None]
        src, dst = (self.src[None] + offs).reshape(-1), (self.dst[None] + offs).reshape(-1)
        n_empty = int((puzzle == 0).sum(1).max())  # HAZARD: host-sync
        steps = min(self.n_steps, 2 * n_empty)
        pred_prev = None
        for _ in range(steps):
            m = self.msg(torch.cat([h[src], h[dst]], -1))
            agg = torch.zeros_like(h).index_add_(0, dst, m)  # CLEAN: index_add_ with CUDA indices, fixed shapes
            h = self.gru(torch.cat([x, agg], -1), h)
            pred = self.out(h).argmax(-1)
            if pred_prev is not None and (pred == pred_prev).all():  # HAZARD: dynamic-control-flow
                break
            pred_prev = pred
        return self.out(h).view(b, 81, 9)


class GraphSolver:
    def __init__(self, model, batch=512):
        self.model = model.cuda().eval()
        self.puzzles = torch.zeros(batch, 81, dtype=torch.long, device="cuda")
        self.graph = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(s):
            for _ in range(2):
                self._solve()
        torch.cuda.current_stream().wait_stream(s)
        with torch.no_grad(), torch.cuda.graph(self.graph, stream=torch.cuda.default_stream()):  # HAZARD: stream
            self._solve()

    def _solve(self):
        logits = self.model(self.puzzles)
        digits = logits.argmax(-1) + 1
        self.solution = torch.where(self.puzzles > 0, self.puzzles, digits)  # CLEAN: clues kept with torch.where, no host round trip
        self.unsure = (logits.softmax(-1).amax(-1) < 0.9).nonzero()  # HAZARD: dynamic-shape

    def __call__(self, batch_np):
        n = len(batch_np)
        self.puzzles.zero_()
        self.puzzles[:n].copy_(torch.from_numpy(batch_np))  # CLEAN: copy_ into the static input before the replay
        self.graph.replay()
        return self.solution[:n].cpu().numpy()


def load(path, n=10000):
    q, s = [], []
    with open(path) as f:
        for row in itertools.islice(csv.DictReader(f), n):
            q.append([int(c) for c in row["quizzes"]])
            s.append([int(c) for c in row["solutions"]])
    return np.array(q), np.array(s)


if __name__ == "__main__":
    model = RRN()
    model.load_state_dict(torch.load("rrn_sudoku.pt", map_location="cpu"))
    solver = GraphSolver(model, batch=512)
    quizzes, solutions = load("sudoku.csv")
    solved = 0
    for i in range(0, len(quizzes), 512):
        out = solver(quizzes[i:i + 512])
        solved += int((out == solutions[i:i + 512]).all(1).sum())
    print(f"solved {solved}/{len(quizzes)} = {solved / len(quizzes):.3%}")
