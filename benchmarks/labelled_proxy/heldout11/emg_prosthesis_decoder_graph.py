"""Myoelectric prosthetic-hand controller (8-channel sEMG -> grip / wrist velocities); a base
GraphRunner captures `_body` once after warm-up and each 100 Hz control tick is one replay."""
import torch
import torch.nn as nn


def emg_features(x):
    mav = x.abs().mean(-1)
    wl = x.diff(dim=-1).abs().sum(-1)
    rms = x.pow(2).mean(-1).sqrt()
    return torch.stack([mav, wl, rms], -1).flatten(1).unsqueeze(1)     # (B, 1, ch*3)


class EMGNet(nn.Module):
    def __init__(self, n_ch=8, hid=64):
        super().__init__()
        self.lstm = nn.LSTM(3 * n_ch, hid, num_layers=2, batch_first=True)
        self.out = nn.Linear(hid, 3)

    def forward(self, feats, state):
        y, state = self.lstm(feats, state)
        return self.out(y[:, -1]), state


class GraphRunner:
    def __init__(self, warmup=3):
        self.warmup = warmup
        self.graph = None

    def _alloc(self):
        raise NotImplementedError

    def _body(self):
        raise NotImplementedError

    def capture(self):
        self._alloc()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(self.warmup):
                self._body()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = self._body()

    def __call__(self, x):
        self.static_x.copy_(x)
        self.graph.replay()
        return self.out


class HandDecoder(GraphRunner):
    def __init__(self, net, motor_bus, n_ch=8, win=200):
        super().__init__()
        self.net = net.cuda().eval()
        self.motor_bus = motor_bus
        self.n_ch, self.win = n_ch, win
        self.electrode_gain = 1.0                            # re-estimated when the socket is re-donned
        self.telemetry = torch.cuda.Stream()

    def _alloc(self):
        self.static_x = torch.zeros(1, self.n_ch, self.win, device="cuda")
        self.h = torch.zeros(2, 1, 64, device="cuda")
        self.c = torch.zeros(2, 1, 64, device="cuda")
        self.vmax = torch.tensor([1.5, 2.0, 1.0], device="cuda")     # grip, pro/supination, flexion
        self.smooth = torch.zeros(1, 3, device="cuda")
        self.log_buf = torch.zeros(1, 3, device="cuda")

    @torch.no_grad()
    def _body(self):
        gain = self.electrode_gain  # HAZARD: python-scalar
        vel, (h, c) = self.net(emg_features(self.static_x * gain), (self.h, self.c))
        self.h, self.c = h, c  # HAZARD: static-address
        vel = torch.clamp(vel, -self.vmax, self.vmax)  # CLEAN: clamp with device-tensor bounds is capturable
        self.smooth.lerp_(vel, 0.3)  # CLEAN: in-place EMA on a persistent buffer
        with torch.cuda.stream(self.telemetry):  # HAZARD: stream
            self.log_buf.copy_(self.smooth)
        self.motor_bus.send(self.smooth.cpu().numpy())  # HAZARD: host-sync
        return self.smooth

    def recalibrate(self, mvc_rms):
        self.electrode_gain = 0.2 / max(mvc_rms, 1e-3)


class TakeHomeDecoder(HandDecoder):
    """Variant for the take-home unit: state advanced in place, command read after replay."""

    @torch.no_grad()
    def _body(self):
        vel, (h, c) = self.net(emg_features(self.static_x), (self.h, self.c))
        self.h.copy_(h)  # CLEAN: LSTM state written in place, same address on every replay
        self.c.copy_(c)
        return torch.clamp(vel, -self.vmax, self.vmax)

    def tick(self, window):
        self.motor_bus.send(self(window).cpu().numpy())  # CLEAN: host read after the replay, outside the graph


if __name__ == "__main__":
    class NullBus:
        send = staticmethod(lambda cmd: None)
    dec = HandDecoder(EMGNet(), NullBus())
    dec.capture()
    for t in range(500):
        dec(torch.randn(1, 8, 200, device="cuda") * 0.1)
        if t == 250:
            dec.recalibrate(0.35)
