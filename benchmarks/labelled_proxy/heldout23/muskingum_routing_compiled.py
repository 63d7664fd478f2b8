"""Muskingum-Cunge channel routing with a learned lateral-inflow term.

Hydrologist's code (previously HEC-HMS + Fortran).  Routing of one flood event is
a compiled function built with functools.partial(torch.compile, mode=...);
events have different lengths.  A second compiled function computes the
hydrograph statistics for the forecast bulletin.
"""
import functools
import time
import numpy as np
import pandas as pd
import torch
import torch.nn as nn

dev = "cuda"
N_REACH = 12
DT_H = 1.0
cg_compile = functools.partial(torch.compile, mode="reduce-overhead")

lateral = nn.Sequential(nn.Linear(3, 32), nn.Tanh(), nn.Linear(32, N_REACH)).to(dev).eval()
lateral.load_state_dict(torch.load("lateral_net.pt"))
K_h = torch.tensor(np.load("reach_K_hours.npy"), dtype=torch.float32, device=dev)
X_w = torch.tensor(np.load("reach_X.npy"), dtype=torch.float32, device=dev)
den = 2 * K_h * (1 - X_w) + DT_H
C0 = (DT_H - 2 * K_h * X_w) / den
C1 = (DT_H + 2 * K_h * X_w) / den
C2 = (2 * K_h * (1 - X_w) - DT_H) / den


def route(inflow, forcing):
    """inflow: (T,) upstream gauge; forcing: (T, 3) rain, pet, soil index."""
    t0 = time.time()  # HAZARD: host-code
    q_lat = torch.relu(lateral(forcing))
    T = inflow.shape[0]
    Q = torch.zeros(T, N_REACH, device=inflow.device)
    Q[0] = inflow[0]
    for t in range(1, T):
        up_now = torch.cat([inflow[t:t + 1], Q[t - 1, :-1]])      # lagged upstream reach (explicit scheme)
        up_prev = torch.cat([inflow[t - 1:t], Q[t - 1, :-1]])
        Q[t] = C0 * up_now + C1 * up_prev + C2 * Q[t - 1] + q_lat[t]
    peaks = Q[:, -1].topk(3).values.tolist()  # HAZARD: host-sync
    return Q, peaks, t0


def bulletin_stats(Q):
    outlet = Q[:, -1]
    return torch.stack([outlet.max(), outlet.argmax().float(), outlet.sum() * 3600 * DT_H])


def bulletin_stats_eager(Q):
    outlet = Q[:, -1]
    print("peak", outlet.max())  # CLEAN: default torch.compile twin, no CUDA graphs
    return outlet.max()


route_c = cg_compile(route)
stats_c = cg_compile(bulletin_stats)
stats_dbg = torch.compile(bulletin_stats_eager)

events = pd.read_csv("flood_events.csv", parse_dates=["time"])
report = []
with torch.no_grad():
    for ev_id, ev in events.groupby("event"):
        inflow = torch.tensor(ev.q_upstream.to_numpy(np.float32), device=dev)
        forcing = torch.tensor(ev[["rain", "pet", "soil"]].to_numpy(np.float32), device=dev)
        Q, peaks, _ = route_c(inflow, forcing)  # HAZARD: dynamic-shape
        stats_dbg(Q)  # CLEAN: default compile, no cudagraph tree is entered
        s = stats_c(Q)
        q_out = Q[:, -1].cpu().numpy()  # HAZARD: static-address
        s_host = s.clone().cpu().numpy()  # CLEAN: cloned right after its own call
        report.append({"event": ev_id, "peak": s_host[0], "t_peak_h": s_host[1], "volume": s_host[2],
                       "top3": peaks, "hydrograph": q_out})
pd.DataFrame(report).to_pickle("bulletin.pkl")
