"""Voice-channel anti-spoofing for a bank's call centre (synthetic / replayed speech).

The IVR sends 4-second 16 kHz segments. `Countermeasure` is the eager reference
implementation; `CompiledCountermeasure` compiles its stages in __init__ with
mode="reduce-overhead". Messages from the IVR bus are dispatched with getattr.
"""
import time

import torch
import torch.nn as nn

SR, SEG, BATCH = 16000, 64000, 64


class RawEncoder(nn.Module):
    def __init__(self, c=64):
        super().__init__()
        self.front = nn.Conv1d(1, c, 251, stride=4, padding=125)
        self.blocks = nn.Sequential(
            nn.BatchNorm1d(c), nn.SELU(), nn.MaxPool1d(3),
            nn.Conv1d(c, c, 3, padding=1), nn.BatchNorm1d(c), nn.SELU(), nn.MaxPool1d(3),
            nn.Conv1d(c, 2 * c, 3, padding=1), nn.BatchNorm1d(2 * c), nn.SELU(),
        )
        self.gru = nn.GRU(2 * c, 128, batch_first=True)
        self.out = nn.Linear(128, 1)

    def forward(self, wav):
        h = self.blocks(self.front(wav.unsqueeze(1).abs()))
        _, last = self.gru(h.transpose(1, 2))
        return self.out(last[-1])


class Countermeasure:
    def __init__(self, net, device="cuda"):
        self.net = net.eval().to(device)
        self.device = device
        self.alarm_llr = 2.0
        self.started = []

    def _preemph_(self, wav):
        wav[:, 1:] -= 0.97 * wav[:, :-1].clone()  # HAZARD: static-address
        return wav

    def _score(self, wav):
        t0 = time.perf_counter()  # HAZARD: host-code
        llr = self.net(wav).squeeze(-1)
        if (llr > 8.0).any():  # HAZARD: dynamic-control-flow
            llr = llr.clamp(max=8.0)
        spoof_mean = float(llr.mean())  # HAZARD: host-sync
        self.started.append(t0)
        return llr, spoof_mean

    def on_segment(self, msg):
        with torch.no_grad():
            wav = self._preemph_(msg["pcm"].to(self.device, non_blocking=True))
            llr, _ = self._score(wav)
        return (llr > self.alarm_llr).cpu()  # CLEAN: read right after the call, in eager code

    def on_batch(self, msg):
        with torch.no_grad():
            wav = msg["pcm"].to(self.device, non_blocking=True)
            emph = torch.cat([wav[:, :1], wav[:, 1:] - 0.97 * wav[:, :-1]], 1)  # CLEAN: out-of-place pre-emphasis, input left untouched
            llr, mean = self._score(emph)
        return torch.where(llr > self.alarm_llr, 1, 0).cpu(), mean

    def handle(self, msg):
        return getattr(self, f"on_{msg['type']}")(msg)


class CompiledCountermeasure(Countermeasure):
    def __init__(self, net, device="cuda"):
        super().__init__(net, device)
        self._preemph_ = torch.compile(self._preemph_, mode="reduce-overhead")
        self._score = torch.compile(self._score, mode="reduce-overhead")


def run_bus(bus, net):
    cm = CompiledCountermeasure(net)
    reference = Countermeasure(net)
    for msg in bus:
        verdict = cm.handle(msg)
        if msg.get("qa_sample"):
            ref = reference.handle(msg)  # CLEAN: eager reference implementation, nothing compiled
            bus.report_mismatch(msg["call_id"], verdict, ref)
        bus.reply(msg["call_id"], verdict)


if __name__ == "__main__":
    net = RawEncoder()
    net.load_state_dict(torch.load("antispoof_rawgru.pt", map_location="cpu"))
    from ivr_bus import IvrBus

    run_bus(IvrBus("tcp://ivr:5555"), net)
