"""Application identification for encrypted traffic on an enterprise firewall (TLS/QUIC).

Per flow, the first 32 packets' sizes, directions and inter-arrival times are collected in
ring buffers by the packet-capture thread. When a flow has 32 packets (or times out) it is
queued for classification; the classifier replays a graph per batch bucket, all captured into
one memory pool, and the policy engine applies QoS / blocking to the returned app label.
"""
import queue
import threading

import numpy as np
import torch
import torch.nn as nn

PKTS, APPS = 32, 40
BUCKETS = (8, 32, 128)
QUIC_PORTS = [443, 784, 853, 8443]


class FlowNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(3, 64, 5, padding=2), nn.ReLU(), nn.Conv1d(64, 64, 5, padding=2),
                                  nn.ReLU(), nn.AdaptiveMaxPool1d(1), nn.Flatten())
        self.port_emb = nn.Embedding(65536, 16)
        self.head = nn.Linear(64 + 16, APPS)
        self.drop = nn.Dropout(0.0)


class Classifier:
    def __init__(self, net, dev="cuda"):
        self.dev, self.net = dev, net.to(dev).eval()
        self.pool = torch.cuda.graph_pool_handle()
        self.inputs, self.ports, self.outs, self.graphs = {}, {}, {}, {}
        self.sample_gen = torch.Generator(device=dev)

    def _classify(self, b):
        x, ports = self.inputs[b], self.ports[b]
        feat = self.net.conv(x)
        quic = torch.tensor(QUIC_PORTS, device=self.dev)  # HAZARD: host-sync
        is_quic = (ports[:, None] == quic).any(-1, keepdim=True).float()
        logits = self.net.head(torch.cat([feat, self.net.port_emb(ports) * (1 + is_quic)], -1))
        seen = torch.unique(ports)  # HAZARD: dynamic-shape
        self.n_ports = seen
        probs = logits.softmax(-1)
        explore = torch.multinomial(probs, 1, generator=self.sample_gen)  # HAZARD: rng
        return probs.argmax(-1), probs.amax(-1), explore

    def capture(self):
        for b in BUCKETS:
            self.inputs[b] = torch.zeros(b, 3, PKTS, device=self.dev)
            self.ports[b] = torch.zeros(b, dtype=torch.long, device=self.dev)
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s), torch.no_grad():  # CLEAN: warm-up on a joined side stream
                for _ in range(3):
                    self._classify(b)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.no_grad(), torch.cuda.graph(g, pool=self.pool, stream=torch.cuda.current_stream()):  # HAZARD: stream
                self.outs[b] = self._classify(b)
            self.graphs[b] = g

    def classify(self, feats, ports):
        n = feats.shape[0]
        b = next(k for k in BUCKETS if k >= n)
        if n == b:
            self.inputs[b] = feats  # HAZARD: static-address
        else:
            self.inputs[b][:n].copy_(feats)  # CLEAN: partial copy into the static input
            self.inputs[b][n:].zero_()
        self.ports[b][:n].copy_(ports)
        self.graphs[b].replay()
        label, conf, _ = self.outs[b]
        return label[:n].cpu().numpy(), conf[:n].cpu().numpy()  # CLEAN: read after replay


def flow_features(ring):
    sizes = np.asarray(ring["sizes"], dtype=np.float32) / 1500.0
    dirs = np.asarray(ring["dirs"], dtype=np.float32)
    iat = np.log1p(np.asarray(ring["iat_us"], dtype=np.float32))
    return torch.from_numpy(np.stack([sizes, dirs, iat])).pin_memory()  # CLEAN: pinned staging in the worker thread


def classify_worker(clf, flows_q, policy):
    while True:
        batch = [flows_q.get()]
        while len(batch) < BUCKETS[-1] and not flows_q.empty():
            batch.append(flows_q.get_nowait())
        feats = torch.stack([flow_features(f) for f in batch]).to(clf.dev, non_blocking=True)
        ports = torch.tensor([f["dport"] for f in batch], device=clf.dev)
        labels, conf = clf.classify(feats, ports)
        for f, app, c in zip(batch, labels, conf):
            policy.apply(f["five_tuple"], int(app) if c > 0.7 else None)


def start(policy):
    clf = Classifier(FlowNet())
    clf.capture()
    flows_q = queue.Queue()
    threading.Thread(target=classify_worker, args=(clf, flows_q, policy), daemon=True).start()
    return flows_q
