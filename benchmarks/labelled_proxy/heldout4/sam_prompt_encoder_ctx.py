"""Interactive segmentation service: SAM-like prompt encoder + mask decoder graphs.

Image embeddings are computed once per image; every click replays a graph that
encodes up to 8 point prompts and decodes masks.  Graphs are built through a
small `graph_capture` context manager shared with the other services.
"""
import contextlib

import torch
import torch.nn as nn


@contextlib.contextmanager
def graph_capture(pool=None, stream=None):
    g = torch.cuda.CUDAGraph()
    stream = stream or torch.cuda.Stream()
    with torch.no_grad(), torch.cuda.graph(g, pool=pool, stream=stream):  # HAZARD: api-misuse
        yield g


class PromptEncoder(nn.Module):
    def __init__(self, dim=256, jitter_px=2.0):
        super().__init__()
        self.register_buffer("gauss", torch.randn(2, dim // 2))  # CLEAN: random projection drawn once at construction
        self.point_embed = nn.Embedding(4, dim)
        self.not_a_point = nn.Parameter(torch.zeros(dim))
        self.jitter_px = jitter_px
        self.jitter_gen = torch.Generator(device="cuda")
        self.default_box = torch.tensor([[0.0, 0.0, 1024.0, 1024.0]])

    def _pe(self, coords):
        proj = 2 * torch.pi * (coords / 1024.0 * 2 - 1) @ self.gauss
        return torch.cat([proj.sin(), proj.cos()], -1)

    def forward(self, coords, labels):
        n_valid = int((labels >= 0).sum())  # HAZARD: host-sync
        coords = coords[:, :max(n_valid, 1)]
        labels = labels[:, :max(n_valid, 1)]
        coords = coords + self.jitter_px * torch.randn(coords.shape, device=coords.device, generator=self.jitter_gen)  # HAZARD: rng
        emb = self._pe(coords) + self.point_embed(labels.clamp_min(0))
        emb[labels == -1] = 0.0  # CLEAN: boolean-mask assignment of a scalar lowers to masked_fill, no sync
        emb = emb + (labels == -1).unsqueeze(-1).to(emb.dtype) * self.not_a_point
        box = self.default_box.cuda()  # HAZARD: pinned-memory
        corners = self._pe(box.view(-1, 2, 2).expand(coords.shape[0], -1, -1))
        return torch.cat([emb, corners], 1)


class InteractiveSegmenter:
    def __init__(self, prompt_enc: PromptEncoder, mask_decoder: nn.Module, max_points=8, multimask=True):
        self.prompt_enc = prompt_enc.eval().cuda()
        self.mask_decoder = mask_decoder.eval().cuda()
        self.multimask = multimask
        self.image_emb = torch.zeros(1, 256, 64, 64, device="cuda")
        self.coords = torch.zeros(1, max_points, 2, device="cuda")
        self.labels = torch.full((1, max_points), -1, dtype=torch.long, device="cuda")
        self.graph, self.masks, self.iou = None, None, None

    def _decode(self):
        sparse = self.prompt_enc(self.coords, self.labels)
        masks, iou = self.mask_decoder(self.image_emb, sparse)
        if self.multimask:  # CLEAN: chosen at construction, never flipped after capture
            best = iou.argmax(-1)
            masks = masks[torch.arange(masks.shape[0], device=masks.device), best]  # CLEAN: device index tensors, no host data
        return masks, iou

    def build(self, pool=None):
        with graph_capture(pool) as g:
            self.masks, self.iou = self._decode()
        self.graph = g

    def set_image(self, image_embedding):
        self.image_emb.copy_(image_embedding)

    def click(self, points, point_labels, threshold=0.0):
        self.coords.zero_()
        self.labels.fill_(-1)
        self.coords[0, :len(points)] = torch.as_tensor(points, dtype=torch.float32, device="cuda")
        self.labels[0, :len(points)] = torch.as_tensor(point_labels, device="cuda")
        self.graph.replay()
        return (self.masks > threshold).cpu()
