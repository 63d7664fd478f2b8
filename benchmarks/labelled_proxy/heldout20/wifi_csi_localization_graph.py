"""Campus indoor positioning from Wi-Fi CSI fingerprints (network-analytics service).

Each request carries CSI amplitudes/phases from the APs that heard a client; the service
embeds them, looks up the k nearest survey fingerprints and returns x, y and floor height.
"""
import logging

import torch
import torch.nn as nn

log = logging.getLogger("campusnet.locate")


class MetricsMixin:
    def _emit(self, name, value):
        log.debug("metric %s=%s", name, value)


class GraphCacheMixin:
    """Per-AP-count graph cache; the host class implements _infer() and sets batch/n_sub."""

    pool = None

    def _graph_for(self, n_ap):
        if n_ap not in self._graphs:
            if GraphCacheMixin.pool is None:
                GraphCacheMixin.pool = torch.cuda.graph_pool_handle()
            x = torch.zeros(self.batch, n_ap, self.n_sub, 2, device="cuda")
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
                with torch.cuda.stream(s):
                    for _ in range(3):
                        self._infer(x)
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, pool=GraphCacheMixin.pool):
                    out = self._infer(x)
            self._inputs[n_ap], self._graphs[n_ap] = x, (g, out)
            self._emit("csi_graphs", len(self._graphs))
        return self._graphs[n_ap]


class CsiEncoder(nn.Module):
    def __init__(self, n_sub=56, dim=64):
        super().__init__()
        self.proj = nn.Sequential(nn.Linear(n_sub, 128), nn.ReLU(), nn.Linear(128, dim))

    def forward(self, amp):  # [B, n_ap, n_sub]
        return self.proj(amp).mean(dim=1)


class CsiLocalizer(GraphCacheMixin, MetricsMixin):
    def __init__(self, net, floor_heights, batch=32, n_sub=56):
        self.net = net.cuda().eval()
        self.floor_heights = list(floor_heights)  # metres above ground, per floor index
        self.batch, self.n_sub = batch, n_sub
        self._graphs, self._inputs = {}, {}
        self.fp = None

    def load_fingerprints(self, path):
        db = torch.load(path, map_location="cuda")  # emb [N, 64], xy [N, 2], floor [N] (long)
        self.fp = {k: v.contiguous() for k, v in db.items()}

    @torch.no_grad()
    def _infer(self, csi):
        amp = torch.linalg.vector_norm(csi, dim=-1)
        serving_aps = torch.unique(amp.argmax(dim=1))  # HAZARD: dynamic-shape
        emb = self.net(amp)
        d = torch.cdist(emb.float(), self.fp["emb"])
        knn_d, knn_i = d.topk(5, dim=1, largest=False)  # CLEAN: fixed-k topk, no data-dependent shape
        xy = self.fp["xy"].index_select(0, knn_i.flatten()).view(*knn_i.shape, 2).mean(1)
        heights = torch.tensor(self.floor_heights, device=csi.device)  # HAZARD: host-sync
        z = heights.index_select(0, self.fp["floor"].index_select(0, knn_i[:, 0]))
        return torch.cat([xy, z.unsqueeze(1)], dim=1), serving_aps

    def locate(self, csi):
        n_ap = csi.shape[1]
        g, out = self._graph_for(n_ap)
        self._inputs[n_ap].copy_(csi)  # CLEAN: batch path refreshes the static input in place
        g.replay()
        return out[0].clone()  # CLEAN: cloned before the next replay overwrites it

    def locate_stream(self, csi_frames):
        # low-latency path added for the asset-tracking tags (PR 4127)
        n_ap = csi_frames.shape[1]
        g, out = self._graph_for(n_ap)
        self._inputs[n_ap] = csi_frames.to("cuda", non_blocking=True)  # HAZARD: static-address
        g.replay()
        return out[0].clone()


def serve(requests, encoder_path, fp_path, floors=(0.0, 4.2, 8.1, 12.0, 15.9)):
    loc = CsiLocalizer(torch.load(encoder_path), floors)
    loc.load_fingerprints(fp_path)
    for req in requests:
        if req["kind"] == "tag":
            yield loc.locate_stream(req["csi"])
        else:
            yield loc.locate(req["csi"].cuda())
