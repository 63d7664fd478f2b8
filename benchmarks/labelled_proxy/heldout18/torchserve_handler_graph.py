"""TorchServe custom handler for a scanned-document quality scorer.

`initialize` loads the eager model through BaseHandler, then captures the scoring
step once for the maximum batch size configured in config.properties
(`batchSize=16`). `inference` copies the preprocessed batch into the static input
and replays the graph; `postprocess` turns scores into JSON.
"""
import io
import os
import time

import numpy as np
import torch
from PIL import Image
from torchvision.transforms import functional as TF
from ts.torch_handler.base_handler import BaseHandler

MAX_BATCH = 16


class GraphedQualityHandler(BaseHandler):
    def initialize(self, context):
        super().initialize(context)  # sets self.model, self.device, self.manifest
        model_dir = context.system_properties.get("model_dir")
        self.model.eval()
        self.class_prior = np.load(os.path.join(model_dir, "class_prior.npy"))  # host, pageable
        self.labels = ["unreadable", "poor", "fair", "good"]
        self.static_in = torch.zeros(MAX_BATCH, 3, 384, 384, device=self.device)
        self.static_stamp = torch.zeros((), dtype=torch.float64, device=self.device)
        self.recent_scores = []
        self._capture()

    def _score(self, x):
        prior = torch.as_tensor(self.class_prior, device=self.device)  # HAZARD: pinned-memory
        logits = self.model(x) + prior.log()
        self.static_stamp.fill_(time.time())  # HAZARD: host-code
        return logits.softmax(dim=-1)

    @torch.no_grad()
    def _capture(self):
        warm = torch.cuda.Stream()
        warm.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(warm):  # CLEAN: warm-up forked from and joined back to the current stream
            for _ in range(3):
                self._score(self.static_in)
        torch.cuda.current_stream().wait_stream(warm)
        self.graph = torch.cuda.CUDAGraph()
        self.graph.capture_begin()  # HAZARD: stream
        self.static_out = self._score(self.static_in)
        self.graph.capture_end()

    def _load_image(self, row):
        payload = row.get("data") or row.get("body")
        img = Image.open(io.BytesIO(payload)).convert("RGB")
        img = TF.resize(img, [384, 384])
        return TF.normalize(TF.to_tensor(img), [0.5] * 3, [0.5] * 3)

    def preprocess(self, data):
        return torch.stack([self._load_image(row) for row in data])

    @torch.no_grad()
    def inference(self, batch, *args, **kwargs):
        n = batch.size(0)
        self.static_in[:n].copy_(batch.to(self.device, non_blocking=True))  # CLEAN: eager upload, then copy_ into the static input
        self.static_in[n:].zero_()
        self.graph.replay()
        self.recent_scores.append(self.static_out)  # HAZARD: static-address
        if len(self.recent_scores) > 64:
            self.recent_scores.pop(0)
        return self.static_out[:n].clone()  # CLEAN: cloned before the next request replays

    def postprocess(self, probs):
        out = []
        for p in probs.cpu():  # CLEAN: host read of a clone, after the replay
            k = int(p.argmax())
            out.append({"label": self.labels[k], "score": round(float(p[k]), 4)})
        return out

    def drift_snapshot(self):
        """Called by the metrics thread: mean class distribution of recent batches."""
        if not self.recent_scores:
            return None
        return torch.stack([s.mean(0) for s in self.recent_scores]).mean(0).tolist()
