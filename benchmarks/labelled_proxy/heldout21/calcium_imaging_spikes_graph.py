"""Rigid registration + CASCADE-like spike inference for two-photon movies, one CUDA graph
per chunk shape (T, H, W), all graphs in one memory pool.

Lab prototype (`twop-tools/graph_pipeline.py`), replays once per 500-frame chunk.
"""
import numpy as np
import tifffile
import torch
import torch.nn as nn

CHUNK = 500


class SpikeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(1, 32, 31, padding=15), nn.ReLU(),
            nn.Conv1d(32, 32, 15, padding=7), nn.ReLU(),
            nn.Conv1d(32, 1, 1), nn.Softplus())

    def forward(self, dff):                      # (n_roi, T) -> spike rate (n_roi, T)
        return self.net(dff[:, None])[:, 0]


class Pipeline:
    def __init__(self, net, recording_noise, model_noise=2.0, device="cuda"):
        self.net = net.to(device).eval()
        self.dev = device
        # CASCADE-style noise matching: top the recording up to the noise level the model saw
        self.extra_sigma = max(model_noise ** 2 - recording_noise ** 2, 0.0) ** 0.5 / 100
        self.gen = torch.Generator(device=device)
        self.gen.manual_seed(7)
        self.pool = torch.cuda.graph_pool_handle()
        self.stats_stream = torch.cuda.Stream()
        self.graphs, self.static = {}, {}

    def _body(self, key):
        st = self.static[key]
        movie = st["movie"]                                           # (T, H, W)
        mean_img = movie.mean(0)
        xc = torch.fft.irfft2(torch.fft.rfft2(mean_img) * st["ref_fft_conj"], s=mean_img.shape)
        H, W = int(movie.shape[1]), int(movie.shape[2])  # CLEAN: shape ints, nothing read from the device
        dy, dx = divmod(int(torch.argmax(xc)), W)  # HAZARD: host-sync
        movie = torch.roll(movie, shifts=(-dy, -dx), dims=(1, 2))
        with torch.cuda.stream(self.stats_stream):  # HAZARD: stream
            st["mean_img"].copy_(movie.mean(0))
        F = movie.flatten(1) @ st["roi_w"].T                          # (T, n_roi)
        F = F - 0.7 * (movie.flatten(1) @ st["neu_w"].T)
        base = F.mean(0, keepdim=True).clamp_min(1.0)
        dff = ((F - base) / base).T.contiguous()
        dff = dff + self.extra_sigma * torch.randn(dff.shape, device=dff.device, generator=self.gen)  # HAZARD: rng
        torch.cuda.empty_cache()  # HAZARD: memory
        st["spikes"].copy_(self.net(dff))

    @torch.no_grad()
    def _capture(self, key, ref, roi_w, neu_w):
        T, H, W = key
        self.static[key] = {
            "movie": torch.zeros(T, H, W, device=self.dev),
            "ref_fft_conj": torch.conj(torch.fft.rfft2(ref.to(self.dev))),  # CLEAN: reference uploaded before capture
            "roi_w": roi_w.to(self.dev),
            "neu_w": neu_w.to(self.dev),
            "mean_img": torch.zeros(H, W, device=self.dev),
            "spikes": torch.zeros(roi_w.shape[0], T, device=self.dev),
        }
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._body(key)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool):
            self._body(key)
        self.graphs[key] = g

    @torch.no_grad()
    def process(self, tif_path, ref, roi_w, neu_w):
        movie = torch.from_numpy(tifffile.imread(tif_path).astype(np.float32))
        out = []
        for chunk in movie.split(CHUNK):
            key = tuple(chunk.shape)
            if key not in self.graphs:
                self._capture(key, ref, roi_w, neu_w)
            self.static[key]["movie"].copy_(chunk.pin_memory(), non_blocking=True)  # CLEAN: pinned copy outside the graph
            self.graphs[key].replay()
            out.append(self.static[key]["spikes"].cpu().numpy())  # CLEAN: host copy after the replay, not a kept view
        return np.concatenate(out, axis=1)


if __name__ == "__main__":
    net = SpikeNet()
    net.load_state_dict(torch.load("cascade_lite_30hz.pt", weights_only=True))
    roi_w = torch.from_numpy(np.load("suite2p/roi_weights.npy")).float()     # (n_roi, H*W)
    neu_w = torch.from_numpy(np.load("suite2p/neuropil_weights.npy")).float()
    ref = torch.from_numpy(np.load("suite2p/ref_img.npy")).float()
    pipe = Pipeline(net, recording_noise=1.4)
    spikes = pipe.process("m12_fov3_00001.tif", ref, roi_w, neu_w)
    np.save("m12_fov3_spikes.npy", spikes)
