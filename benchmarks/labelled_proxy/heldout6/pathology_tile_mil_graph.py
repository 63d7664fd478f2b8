"""Whole-slide image classification with gated-attention MIL (CLAM-style).

256x256 tiles are read from the slide pyramid on the CPU, stain-normalised (Macenko
reference) and embedded on the GPU in fixed batches of 256 by a captured graph. The
slide-level attention pooling and the heatmap run eagerly once per slide.
"""
import numpy as np
import torch
import torch.nn as nn

TILE, BATCH, EMB = 256, 256, 512
MACENKO_REF = np.array([[0.5626, 0.2159], [0.7201, 0.8012], [0.4062, 0.5581]], dtype=np.float32)


class TileEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        chans = [3, 32, 64, 128, 256]
        layers = []
        for cin, cout in zip(chans[:-1], chans[1:]):
            layers += [nn.Conv2d(cin, cout, 3, 2, 1), nn.BatchNorm2d(cout), nn.ReLU()]
        self.features = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.proj = nn.Linear(256, EMB)

    def forward(self, x):
        return self.proj(self.features(x))


class GatedAttentionMIL(nn.Module):
    def __init__(self, n_cls=2):
        super().__init__()
        self.a, self.b = nn.Linear(EMB, 128), nn.Linear(EMB, 128)
        self.w = nn.Linear(128, 1)
        self.cls = nn.Linear(EMB, n_cls)

    def forward(self, h):
        att = self.w(torch.tanh(self.a(h)) * torch.sigmoid(self.b(h))).squeeze(-1).softmax(0)
        return self.cls((att[:, None] * h).sum(0)), att


class SlideEmbedder:
    def __init__(self, enc):
        self.enc = enc.eval()
        ref = torch.from_numpy(MACENKO_REF).cuda()  # CLEAN: uploaded once in __init__
        self.stain_ref, self.ref_pinv = ref, torch.linalg.pinv(ref)
        self.max_conc_np = np.array([1.9705, 1.0308], dtype=np.float32)  # re-estimated per slide
        self.static_tiles = torch.zeros(BATCH, 3, TILE, TILE, device="cuda", dtype=torch.uint8)
        self.tile_norms = torch.zeros(BATCH, device="cuda")
        self.tta_gen = torch.Generator(device="cuda")
        self.heat_stream = torch.cuda.Stream()
        self.graph = torch.cuda.CUDAGraph()

    def _embed(self):
        od = -torch.log((self.static_tiles.float() + 1.0) / 256.0)
        max_c = torch.from_numpy(self.max_conc_np).cuda()  # HAZARD: pinned-memory
        conc = torch.einsum("bchw,sc->bshw", od, self.ref_pinv) / max_c.view(1, 2, 1, 1)
        x = torch.exp(-torch.einsum("bshw,cs->bchw", conc, self.stain_ref)).clamp(0, 1)
        flip = torch.rand(BATCH, 1, 1, 1, device="cuda", generator=self.tta_gen) < 0.5  # HAZARD: rng
        x = torch.where(flip, x.flip(-1), x)
        tissue = x.mean(dim=(1, 2, 3)) < 0.85
        feats = self.enc(x) * tissue[:, None].float()  # CLEAN: mask multiply keeps shapes static
        self.slide_proto = feats[tissue].mean(0)  # HAZARD: dynamic-shape
        with torch.cuda.stream(self.heat_stream):  # HAZARD: stream
            self.tile_norms.copy_(feats.norm(dim=-1))
        torch.cuda.empty_cache()  # HAZARD: memory
        return feats

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._embed()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.static_feats = self._embed()

    @torch.no_grad()
    def embed_slide(self, tile_batches, max_conc):
        self.max_conc_np = max_conc
        out = []
        for tiles_u8 in tile_batches:
            self.static_tiles.copy_(tiles_u8.pin_memory(), non_blocking=True)  # CLEAN: pinned copy before replay
            self.graph.replay()
            out.append(self.static_feats.clone())
        return torch.cat(out)


@torch.no_grad()
def classify_slide(embedder, mil, tile_batches, max_conc, att_thr=0.002):
    h = embedder.embed_slide(tile_batches, max_conc)
    h = h[h.abs().sum(-1) > 0]
    logits, att = mil(h)
    hot_tiles = torch.nonzero(att > att_thr).squeeze(-1)  # CLEAN: eager heatmap, outside the graph
    return logits.softmax(-1), hot_tiles.cpu()
