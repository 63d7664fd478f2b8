"""Streamlit dashboard for a factory line: vibration windows from a queue are scored by an
autoencoder. A `graph_capture` helper (copied from the team's utils) captures the scorer.
"""
import contextlib
import queue
import time

import numpy as np
import streamlit as st
import torch
import torch.nn as nn

WIN, CH = 256, 6
incoming: "queue.Queue[np.ndarray]" = queue.Queue()
BASELINE = np.linspace(0.9, 1.1, CH, dtype=np.float32)


@contextlib.contextmanager
def graph_capture(graph, warmup_fn=None, n_warmup=3):
    if warmup_fn is not None:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # CLEAN: forked warm-up, joined below
            for _ in range(n_warmup):
                warmup_fn()
        torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
        yield graph


class AE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv1d(CH, 32, 7, 2, 3), nn.ReLU(), nn.Conv1d(32, 16, 7, 2, 3))
        self.dec = nn.Sequential(nn.ConvTranspose1d(16, 32, 4, 2, 1), nn.ReLU(), nn.ConvTranspose1d(32, CH, 4, 2, 1))


@st.cache_resource
def get_scorer():
    ae = AE().cuda().eval()
    x = torch.zeros(1, CH, WIN, device="cuda")
    state = {}

    def score():
        scale = torch.from_numpy(BASELINE).cuda().view(1, CH, 1)  # HAZARD: pinned-memory
        xs = x / scale
        err = (ae.dec(ae.enc(xs)) - xs).pow(2).mean()
        state["t"] = time.time()  # HAZARD: host-code
        state["peak"] = xs.abs().max().item()  # HAZARD: host-sync
        return err

    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), graph_capture(g, warmup_fn=score):
        state["err"] = score()
    return g, x, state


st.title("Line 3 vibration monitor")
threshold = st.slider("Alarm threshold", 0.0, 1.0, 0.2)
g, x_static, state = get_scorer()
chart = st.empty()
history = []
for _ in range(50):
    try:
        window = incoming.get(timeout=0.2)
    except queue.Empty:
        break
    x_static.copy_(torch.from_numpy(window).view(1, CH, WIN))  # CLEAN: copy_ into the static input (host to device, outside capture)
    g.replay()
    err = float(state["err"])  # CLEAN: host read after replay
    history.append(err)
    if err > threshold:
        st.error(f"anomaly: {err:.3f} at {time.strftime('%H:%M:%S')}")  # CLEAN: eager UI code
chart.line_chart(history)
