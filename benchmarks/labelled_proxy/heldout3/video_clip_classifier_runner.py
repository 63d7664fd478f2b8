"""Multi-clip video classifier served with one CUDA graph per number of clips.

Clips are decoded on the host, stacked and normalised, then scored by a frame
backbone + temporal head. Graphs are captured with capture_begin/capture_end.
"""
import numpy as np
import numpy.random as npr
import torch
import torch.nn as nn


class TemporalHead(nn.Module):
    def __init__(self, dim, num_classes, num_frames=16, stride=2):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.proj = nn.Linear(dim, num_classes)
        self.frame_idx = list(range(0, num_frames, stride))

    def forward(self, feats):  # (clips, frames, dim)
        sel = feats[:, self.frame_idx]  # HAZARD: host-sync
        return self.proj(self.norm(sel).mean(dim=1))


class ClipRunner:
    def __init__(self, backbone, head, clip_counts=(1, 3, 5), frames=16, size=224):
        self.backbone, self.head = backbone.eval(), head.eval()
        self.frames, self.size = frames, size
        self.clip_counts = sorted(clip_counts, reverse=True)
        self.stream = torch.cuda.Stream()
        self.graphs, self.inputs, self.outputs = {}, {}, {}
        self.mean = torch.tensor([0.45, 0.45, 0.45], device="cuda").view(1, 1, 3, 1, 1)  # CLEAN: built once in __init__, outside any capture
        self.std = torch.tensor([0.225, 0.225, 0.225], device="cuda").view(1, 1, 3, 1, 1)

    def _tta_flip(self, clips):
        if npr.rand() < 0.5:  # HAZARD: host-code
            return clips.flip(-1)
        return clips

    def _forward(self, clips):
        clips = self._tta_flip((clips - self.mean) / self.std)
        n, t = clips.shape[:2]
        feats = self.backbone(clips.flatten(0, 1)).view(n, t, -1)  # CLEAN: view sizes come from the static input shape
        logits = self.head(feats)
        return logits.softmax(-1).mean(0)

    @torch.no_grad()
    def capture(self):
        with torch.autocast("cuda", dtype=torch.float16):  # HAZARD: autocast-cache
            for n in self.clip_counts:
                x = torch.zeros(n, self.frames, 3, self.size, self.size, device="cuda")
                self.stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(self.stream):
                    for _ in range(2):
                        self._forward(x)
                    g = torch.cuda.CUDAGraph()
                    g.capture_begin()  # CLEAN: current stream here is self.stream (a side stream), after warm-up on it
                    y = self._forward(x)
                    g.capture_end()
                torch.cuda.current_stream().wait_stream(self.stream)
                self.graphs[n], self.inputs[n], self.outputs[n] = g, x, y

    @torch.no_grad()
    def classify(self, clips):
        n = int(clips.shape[0])
        if n not in self.graphs:
            return self._forward(clips)
        if clips.is_contiguous() and clips.dtype == self.inputs[n].dtype:
            self.inputs[n] = clips  # HAZARD: static-address
        else:
            self.inputs[n].copy_(clips)  # CLEAN: copy_ into the captured input
        self.graphs[n].replay()
        torch.cuda.synchronize()  # CLEAN: host sync after replay, outside the captured region
        return self.outputs[n].clone()


def load_clips(paths, decoder, frames=16):
    clips = [decoder(p, num_frames=frames) for p in paths]
    batch = torch.from_numpy(np.stack(clips)).permute(0, 1, 4, 2, 3).float() / 255.0
    return batch.pin_memory().cuda(non_blocking=True)


def run(paths, runner, decoder, labels):
    probs = runner.classify(load_clips(paths, decoder))
    top = probs.topk(5)
    return [(labels[i], float(p)) for p, i in zip(top.values.tolist(), top.indices.tolist())]
