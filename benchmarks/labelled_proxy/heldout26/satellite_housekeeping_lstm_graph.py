"""Ground-segment anomaly detection on spacecraft housekeeping telemetry (Telemanom-style).

Each downlink pass delivers telemetry frames that a decoder thread turns into per-channel
windows. An LSTM forecaster predicts the next values; its errors are smoothed and compared
with a dynamic threshold. The forecaster keeps learning online: one whole training step
(forward, backward, optimizer) is captured in a CUDA graph and replayed per window.
"""
import queue
import random
import threading

import torch
import torch.nn as nn

CHANNELS, HIST, HORIZON = 55, 250, 10


class Forecaster(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(CHANNELS, 80, num_layers=2, batch_first=True)
        self.head = nn.Linear(80, CHANNELS * HORIZON)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1]).view(-1, HORIZON, CHANNELS)


class OnlineTrainer:
    def __init__(self, dev="cuda"):
        self.model = Forecaster().to(dev)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3, capturable=True)
        self.sched = torch.optim.lr_scheduler.StepLR(self.opt, step_size=500, gamma=0.5)
        self.x = torch.zeros(1, HIST, CHANNELS, device=dev)
        self.y = torch.zeros(1, HORIZON, CHANNELS, device=dev)
        self.err_hist = torch.zeros(1000, device=dev)
        self.stats = torch.cuda.Stream()
        self.dev = dev

    def _train_step(self):
        pred = self.model(self.x)
        err = (pred - self.y).abs().mean(dim=(1, 2))
        loss = err.mean()
        if random.random() < 0.05:  # HAZARD: host-code
            loss = loss * 0.0
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)  # CLEAN: capturable, no host read
        self.opt.step()  # CLEAN: Adam with capturable=True
        self.opt.zero_grad(set_to_none=False)
        self.err_hist.copy_(torch.roll(self.err_hist, 1))
        self.err_hist[0] = err.detach()[0]
        with torch.cuda.stream(self.stats):  # HAZARD: stream
            self.smoothed = self.err_hist[:100].mean()
        self.threshold = float(self.err_hist.mean() + 3 * self.err_hist.std())  # HAZARD: host-sync
        torch.cuda.empty_cache()  # HAZARD: memory
        return err

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._train_step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.err = self._train_step()

    def on_window(self, hist, future):
        self.x.copy_(hist)
        self.y.copy_(future)
        self.graph.replay()
        self.sched.step()  # HAZARD: optimizer
        return self.err.item()  # CLEAN: read after replay


def decoder_thread(passes, windows):
    for frame_batch in passes:
        for hist, future in frame_batch:
            windows.put((hist.pin_memory(), future.pin_memory()))  # CLEAN: pinned in the decoder thread, outside the graph
    windows.put(None)


def run(passes, ops_console):
    trainer = OnlineTrainer()
    trainer.capture()
    windows = queue.Queue(maxsize=64)
    threading.Thread(target=decoder_thread, args=(passes, windows), daemon=True).start()
    for item in iter(windows.get, None):
        e = trainer.on_window(*(t.to(trainer.dev, non_blocking=True) for t in item))
        if e > 0.2:
            ops_console.flag(e)
