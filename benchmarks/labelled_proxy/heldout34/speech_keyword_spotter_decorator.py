"""Wake-word spotter for a smart speaker: a capture-on-first-call decorator and a generator pipeline."""
import functools
import logging
import numpy as np
import torch
import torch.nn as nn

log = logging.getLogger("kws")

def graphed_method(fn):
    @functools.wraps(fn)
    def wrapper(self, *inputs):
        state = self.__dict__.setdefault("_graph_state", {})
        if "graph" not in state:
            state["inputs"] = [x.clone() for x in inputs]
            state["graph"] = torch.cuda.CUDAGraph()
            with torch.cuda.graph(state["graph"]):  # HAZARD: api-misuse
                state["outputs"] = fn(self, *state["inputs"])
        for dst, src in zip(state["inputs"], inputs):
            dst.copy_(src)  # CLEAN: copy_ into the captured inputs
        state["graph"].replay()
        return state["outputs"]
    return wrapper

class MelBank:
    def __init__(self, n_fft=512, n_mels=40):
        self.fb = np.abs(np.random.default_rng(0).normal(size=(n_fft // 2 + 1, n_mels))).astype(np.float32)
    def matrix(self, device):
        return torch.from_numpy(self.fb).to(device, non_blocking=True)  # HAZARD: pinned-memory

class Frontend:
    def __init__(self, bank):
        self.bank = bank
        self.window = torch.hann_window(512, device="cuda")  # CLEAN: created once, outside the capture
    def logmel(self, audio):
        spec = torch.stft(audio, 512, 160, window=self.window, return_complex=True).abs().pow(2)
        return torch.log(spec.transpose(1, 2) @ self.bank.matrix(audio.device) + 1e-6)

class Debug:
    @staticmethod
    def peak(tag, x):
        log.debug(f"{tag} peak={x.max()}")  # HAZARD: host-sync
    @staticmethod
    def note(tag):
        log.debug("%s captured", tag)  # CLEAN: plain string, no tensor formatted

class KwsNet(nn.Module):
    def __init__(self, n_mels=40, n_kw=12):
        super().__init__()
        self.gru = nn.GRU(n_mels, 128, batch_first=True)
        self.out = nn.Linear(128, n_kw)
    def forward(self, feats):
        h, _ = self.gru(feats)
        return self.out(h[:, -1]).softmax(-1)

class Spotter:
    def __init__(self, net, frontend):
        self.net, self.frontend = net.cuda().eval(), frontend
    @graphed_method
    def detect(self, audio):
        feats = self.frontend.logmel(audio)
        Debug.note("kws")
        probs = self.net(feats)
        Debug.peak("kws", probs)
        return probs

def frames(mic, hop=16000):
    buf = torch.empty(4, hop, pin_memory=True)  # CLEAN: pinned staging buffer, filled on the host
    for chunk in mic:
        buf.copy_(chunk)
        yield buf.to("cuda")  # CLEAN: upload from pinned memory, outside the capture

def listen(mic):
    spotter = Spotter(KwsNet(), Frontend(MelBank()))
    history = []
    with torch.no_grad():
        for audio in frames(mic):
            probs = spotter.detect(audio)
            history.append(probs)  # HAZARD: static-address
    return torch.stack(history).argmax(-1)
