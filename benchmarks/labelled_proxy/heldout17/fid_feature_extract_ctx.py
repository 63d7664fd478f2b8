"""FID evaluation harness for generator checkpoints.

Generated images are resized to 299x299, passed through an Inception-style feature
network, and first/second moments are accumulated on the GPU in float64. The per-batch
accumulation is captured through a small context manager and replayed for every batch.
"""
import contextlib
import logging

import numpy as np
import scipy.linalg
import torch
import torch.nn.functional as F

log = logging.getLogger("fid")


@contextlib.contextmanager
def graph_capture(pool=None):
    g = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        with torch.cuda.graph(g, pool=pool, stream=side):  # HAZARD: api-misuse
            yield g
    torch.cuda.current_stream().wait_stream(side)


class FIDHarness:
    def __init__(self, feat_net, ref_stats_path, batch=250, feat_dim=2048, img=256):
        self.net = feat_net.eval().cuda()
        ref = np.load(ref_stats_path)
        self.ref_mu = torch.from_numpy(ref["mu"].astype(np.float64))
        self.ref_sigma = ref["sigma"]
        self.imgs = torch.zeros(batch, 3, img, img, device="cuda")
        self.sum = torch.zeros(feat_dim, dtype=torch.float64, device="cuda")
        self.outer = torch.zeros(feat_dim, feat_dim, dtype=torch.float64, device="cuda")
        self.count = torch.zeros((), dtype=torch.float64, device="cuda")
        self.graph = None

    def reset(self):
        self.sum.zero_()
        self.outer.zero_()
        self.count.zero_()

    def _accumulate(self):
        x = F.interpolate(self.imgs, size=(299, 299), mode="bilinear", align_corners=False)  # CLEAN: fixed output size
        feats = self.net((x - 0.5) / 0.5).double()
        self.sum.add_(feats.sum(0))
        self.outer.addmm_(feats.t(), feats)  # CLEAN: in-place accumulation on the device
        self.count.add_(feats.shape[0])
        log.debug("accumulated one batch of Inception features")  # CLEAN: plain string, no tensor formatting
        log.debug(f"batch feature mean {feats.mean()}")  # HAZARD: host-sync
        self.batch_gap = (feats.mean(0) - self.ref_mu.to("cuda")).pow(2).sum()  # HAZARD: pinned-memory
        torch.cuda.empty_cache()  # HAZARD: memory

    @torch.no_grad()
    def add_batch(self, images):
        self.imgs.copy_(images)  # CLEAN: copy into the static image buffer
        if self.graph is None:
            with graph_capture() as g:
                self._accumulate()
            self.graph = g
        self.graph.replay()

    def fid(self):
        n = self.count.item()  # CLEAN: host read after the replays
        mu = (self.sum / n).cpu().numpy()
        sigma = ((self.outer - torch.outer(self.sum, self.sum) / n) / (n - 1)).cpu().numpy()
        diff = mu - self.ref_mu.numpy()
        covmean, _ = scipy.linalg.sqrtm(sigma.dot(self.ref_sigma), disp=False)
        if np.iscomplexobj(covmean):
            covmean = covmean.real
        return float(diff.dot(diff) + np.trace(sigma) + np.trace(self.ref_sigma) - 2 * np.trace(covmean))


def evaluate_checkpoint(generator, harness, n_samples=50_000, batch=250, z_dim=512):
    harness.reset()
    with torch.no_grad():
        for _ in range(n_samples // batch):
            z = torch.randn(batch, z_dim, device="cuda")
            harness.add_batch((generator(z) + 1) / 2)
    return harness.fid()
