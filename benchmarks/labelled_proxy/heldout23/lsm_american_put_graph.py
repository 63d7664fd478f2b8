"""Longstaff-Schwartz pricing of American puts, batched over a book of strikes.
Quant-desk script (formerly C++/QuantLib + Eigen).  Paths and the backward
regression are captured once per maturity; the desk reprices every minute.
"""
import numpy as np
import pandas as pd
import torch

SEED = 20240611
N_PATHS = 200_000
N_STEPS = 50
dev = torch.device("cuda")


def det3(A):
    return (A[0, 0] * (A[1, 1] * A[2, 2] - A[1, 2] * A[2, 1])
            - A[0, 1] * (A[1, 0] * A[2, 2] - A[1, 2] * A[2, 0])
            + A[0, 2] * (A[1, 0] * A[2, 1] - A[1, 1] * A[2, 0]))


def solve3(A, b):
    det = det3(A)
    cols = []
    for j in range(3):
        Aj = A.clone()
        Aj[:, j] = b[:, 0]
        cols.append(det3(Aj) / det)
    return torch.stack(cols)[:, None]


def basis(s):
    return torch.stack([torch.ones_like(s), s, s * s], dim=-1)

class LSMPricer:
    def __init__(self, spot, vol, rate, strike, maturity):
        self.spot = torch.tensor([spot], device=dev)
        self.vol = torch.tensor([vol], device=dev)
        self.rate = torch.tensor([rate], device=dev)
        self.strike = torch.tensor([strike], device=dev)
        self.maturity = maturity
        self.price = torch.zeros((), device=dev)
        self.graph = torch.cuda.CUDAGraph()
        self.history = []
        self.boundary = torch.zeros(N_STEPS, device=dev)
        self.gen = torch.Generator(device=dev)
        self.gen.manual_seed(SEED)

    def simulate(self):
        dt = self.maturity / N_STEPS
        z = torch.randn(N_PATHS // 2, N_STEPS, device=dev, generator=self.gen)  # HAZARD: rng
        z = torch.cat([z, -z])                     # antithetic pairs
        incr = (self.rate - 0.5 * self.vol ** 2) * dt + self.vol * (dt ** 0.5) * z
        return self.spot * torch.exp(torch.cumsum(incr, dim=1))

    def backward_induction(self, S):
        dt = self.maturity / N_STEPS
        disc = torch.exp(-self.rate * dt)
        cash = torch.clamp(self.strike - S[:, -1], min=0.0)
        for t in range(N_STEPS - 2, -1, -1):
            cash = cash * disc
            st = S[:, t]
            itm = (st < self.strike).float()
            X = basis(st) * itm[:, None]          # regression on in-the-money paths only
            beta = solve3(X.T @ X + 1e-8 * torch.eye(3, device=dev), X.T @ cash[:, None])
            cont = (basis(st) @ beta).squeeze(-1)
            exercise = torch.clamp(self.strike - st, min=0.0)
            do_ex = (itm > 0) & (exercise > cont)
            cash = torch.where(do_ex, exercise, cash)  # CLEAN: torch.where, fixed shape
            ex_spots = st[do_ex]  # HAZARD: dynamic-shape
            self.boundary[t] = ex_spots.amax()
        return cash.mean() * disc

    def step(self):
        self.price.copy_(self.backward_induction(self.simulate()))

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            self.step()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):  # HAZARD: api-misuse
            self.step()

    def set_maturity(self, maturity):
        self.maturity = maturity
        self.capture()

    def reprice(self, spot):
        self.spot.fill_(spot)  # CLEAN: in-place update of the captured spot tensor
        self.graph.replay()
        self.history.append(self.price)  # HAZARD: static-address
        return self.price.clone()  # CLEAN: cloned before the next replay


def run_book(path="book.csv"):
    book = pd.read_csv(path)
    out = []
    for _, row in book.iterrows():
        p = LSMPricer(row.spot, row.vol, row.rate, row.strike, row.T)
        p.capture()
        px = p.reprice(row.spot)
        out.append(float(px))
        p.set_maturity(row.T - 1.0 / 252)
        out.append(float(p.reprice(row.spot)))
    return np.array(out).reshape(-1, 2)


if __name__ == "__main__":
    print(run_book())
