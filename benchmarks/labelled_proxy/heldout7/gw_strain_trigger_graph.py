"""Low-latency gravitational-wave trigger for 1 s, two-detector (H1/L1) strain.

A whitening stage and a small 1D CNN produce a detection probability and a per-sample
SNR proxy; a matched-filter pass over a small template bank is replayed as a second
graph for the candidates. Both graphs are captured once after the PSD estimate is ready.
"""
import numpy as np
import torch
import torch.nn as nn

FS = 2048
SEG = FS


class StrainCNN(nn.Module):
    def __init__(self, ch=(32, 64, 128)):
        super().__init__()
        layers, c = [], 2
        for w in ch:
            layers += [nn.Conv1d(c, w, 16, padding=8), nn.BatchNorm1d(w), nn.ELU(), nn.MaxPool1d(4)]
            c = w
        self.body = nn.Sequential(*layers)
        self.snr_head = nn.Conv1d(c, 1, 1)
        self.cls_head = nn.Linear(c, 1)

    def forward(self, x):
        h = self.body(x)
        snr = nn.functional.softplus(self.snr_head(h)).squeeze(1)
        return self.cls_head(h.mean(-1)).squeeze(-1), snr


class TriggerPipeline:
    def __init__(self, model, psd_np, templates_np, device="cuda"):
        self.model = model.eval().to(device)
        self.psd_np = psd_np.astype(np.float32)                      # (2, SEG // 2 + 1)
        self.window = torch.hann_window(SEG, device=device)
        self.inv_asd = torch.as_tensor(1.0 / np.sqrt(self.psd_np), device=device)  # CLEAN: staged in __init__, outside capture
        self.bank = torch.fft.rfft(torch.as_tensor(templates_np, device=device))    # template FFTs, eager
        self.static_strain = torch.zeros(2, SEG, device=device)
        self.side = torch.cuda.Stream()
        self.graph = torch.cuda.CUDAGraph()
        self.bank_graph = torch.cuda.CUDAGraph()
        self.last_peak = 0.0

    def _whiten(self, x):
        spec = torch.fft.rfft(x * self.window)
        psd = torch.as_tensor(self.psd_np, device=x.device)  # HAZARD: pinned-memory
        return torch.fft.irfft(spec / psd.sqrt(), n=SEG)

    def _trigger(self):
        w = self._whiten(self.static_strain)
        logit, snr = self.model(w.unsqueeze(0))
        self.last_peak = snr.max().item()  # HAZARD: host-sync
        return torch.sigmoid(logit), snr

    def _matched_filter(self):
        spec = torch.fft.rfft(self.static_strain * self.window) * self.inv_asd
        corr = torch.fft.irfft(spec.unsqueeze(1) * self.bank.conj(), n=SEG)   # (det, tmpl, t)
        net = corr.abs().pow(2).sum(0).sqrt()
        return net.amax(dim=-1)  # CLEAN: peak per template kept on the device

    @torch.no_grad()
    def capture(self):
        warm = torch.cuda.Stream()
        warm.wait_stream(torch.cuda.current_stream())
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            with torch.cuda.stream(warm):
                for _ in range(3):
                    self._trigger()
            torch.cuda.current_stream().wait_stream(warm)
            self.graph.capture_begin()  # HAZARD: stream
            self.static_prob, self.static_snr = self._trigger()
            self.graph.capture_end()

        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(2):
                self._matched_filter()
            self.bank_graph.capture_begin()  # CLEAN: captured inside the side-stream context
            self.static_bank_peak = self._matched_filter()
            self.bank_graph.capture_end()
        torch.cuda.current_stream().wait_stream(self.side)

    @torch.no_grad()
    def on_segment(self, strain_pinned, threshold=0.9):
        self.static_strain.copy_(strain_pinned, non_blocking=True)  # CLEAN: pinned source, copied outside the graph
        self.graph.replay()
        prob = self.static_prob.item()  # CLEAN: read after replay, outside the graph
        if prob < threshold:
            return None
        self.bank_graph.replay()
        best = int(self.static_bank_peak.argmax())
        return {"prob": prob, "template": best, "peak_snr": float(self.static_bank_peak[best])}
