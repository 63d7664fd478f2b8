"""Streaming ASR: a chunked conformer encoder + CTC greedy head, captured per chunk size."""
import numpy as np
import torch
import torch.nn as nn


class ChunkEncoder(nn.Module):
    def __init__(self, n_mels=80, dim=256, vocab=1024):
        super().__init__()
        self.sub = nn.Conv1d(n_mels, dim, 3, stride=2, padding=1)
        self.layers = nn.TransformerEncoder(nn.TransformerEncoderLayer(dim, 4, 1024, batch_first=True), 4)
        self.ctc = nn.Linear(dim, vocab)

    def forward(self, feats):
        h = self.sub(feats.transpose(1, 2)).transpose(1, 2)
        return self.ctc(self.layers(h)).log_softmax(-1)


class GraphedCTCDecoder:
    def __init__(self, encoder, batch=8, chunk_frames=160, n_mels=80, blank=0):
        self.enc = encoder.cuda().eval()
        self.blank = blank
        self.batch_lens = [chunk_frames] * batch
        self.np_feats = np.zeros((batch, chunk_frames, n_mels), dtype=np.float32)
        self.static_feats = torch.zeros(batch, chunk_frames, n_mels, device="cuda")
        self.host_best = torch.empty(batch, chunk_frames // 2, dtype=torch.long).pin_memory()
        self.copy_done = torch.cuda.Event()
        self.graph = torch.cuda.CUDAGraph()

    @torch.inference_mode()
    def _decode(self):
        host_feats = torch.from_numpy(self.np_feats).pin_memory()  # HAZARD: pinned-memory
        self.static_feats.copy_(host_feats, non_blocking=True)
        feat_lens = torch.tensor(self.batch_lens).pin_memory().cuda(non_blocking=True)  # HAZARD: pinned-memory
        logp = self.enc(self.static_feats)
        best = logp.argmax(-1)  # CLEAN: argmax keeps a fixed output shape
        out_lens = (feat_lens + 1) // 2
        frame_ok = torch.arange(best.shape[1], device="cuda")[None] < out_lens[:, None]
        best = torch.where(frame_ok, best, torch.full_like(best, self.blank))
        collapsed = torch.unique_consecutive(best, dim=-1)  # HAZARD: dynamic-shape
        self.host_best.copy_(best, non_blocking=True)  # CLEAN: device-to-host copy into a persistent pinned buffer
        return collapsed

    def capture(self):
        with torch.cuda.graph(self.graph):  # HAZARD: api-misuse
            self.collapsed = self._decode()

    def decode_chunk(self, feats_np, lens):
        self.np_feats[:] = feats_np
        self.batch_lens[:] = lens
        self.graph.replay()
        self.copy_done.record()
        self.copy_done.synchronize()  # CLEAN: host waits for the replay's copy outside the region
        hyps = []
        for row in self.host_best.numpy():
            prev, toks = -1, []
            for t in row:
                if t != prev and t != self.blank:
                    toks.append(int(t))
                prev = t
            hyps.append(toks)
        return hyps
