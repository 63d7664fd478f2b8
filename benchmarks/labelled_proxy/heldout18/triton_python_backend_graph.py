"""model.py of a Triton Inference Server *Python backend* model (product-image tagger).

`initialize` builds the eager PyTorch model on the instance's GPU and captures one
CUDA graph for the configured `max_batch_size`; `execute` copies every request batch
into the static input, replays the graph and returns the top-k tags. Parameters come
from config.pbtxt (`parameters { key: "topk" value: { string_value: "5" } }`).
"""
import json

import numpy as np
import torch
import torch.nn.functional as F
import triton_python_backend_utils as pb_utils

from tagger.modeling import build_tagger


class TritonPythonModel:
    def initialize(self, args):
        cfg = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in cfg.get("parameters", {}).items()}
        self.max_bs = int(cfg["max_batch_size"])
        self.topk = int(params.get("topk", "5"))
        self.min_conf = float(params.get("min_confidence", "0.2"))
        self.tag_ids = [int(t) for t in params.get("enabled_tags", "").split(",") if t]
        self.logger = pb_utils.Logger

        self.device = torch.device(f"cuda:{args['model_instance_device_id']}")
        torch.cuda.set_device(self.device)
        self.model = build_tagger(params["weights"]).to(self.device).eval()
        self.mean = torch.tensor([0.485, 0.456, 0.406], device=self.device).view(1, 3, 1, 1)  # CLEAN: built once, before any capture
        self.std = torch.tensor([0.229, 0.224, 0.225], device=self.device).view(1, 3, 1, 1)
        self.static_x = torch.zeros(self.max_bs, 3, 224, 224, device=self.device)

        self.graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(self.graph):  # HAZARD: api-misuse
            self.static_scores, self.static_idx = self._infer(self.static_x)
        self.logger.log_info(f"captured tagger graph for batch {self.max_bs}")

    def _infer(self, x):
        x = (x - self.mean) / self.std
        logits = self.model(x)
        enabled = torch.tensor(self.tag_ids, device=self.device)  # HAZARD: host-sync
        logits = logits.index_select(1, enabled)
        probs = torch.sigmoid(logits)
        if probs.max() < self.min_conf:  # HAZARD: dynamic-control-flow
            self.logger.log_warn("no tag above the confidence floor in this batch")
        probs = probs.masked_fill(probs < self.min_conf, 0.0)  # CLEAN: masked_fill keeps the shape
        torch.cuda.empty_cache()  # HAZARD: memory
        return probs.topk(self.topk, dim=1)

    def _to_device(self, images: np.ndarray):
        x = torch.from_numpy(images).permute(0, 3, 1, 2).float().div_(255.0)
        return F.interpolate(x, size=(224, 224), mode="bilinear", align_corners=False)

    def execute(self, requests):
        responses = []
        for request in requests:
            images = pb_utils.get_input_tensor_by_name(request, "IMAGE").as_numpy()
            n = images.shape[0]
            if n > self.max_bs:
                err = pb_utils.TritonError(f"batch {n} exceeds max_batch_size {self.max_bs}")
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=err))
                continue
            self.static_x[:n].copy_(self._to_device(images))  # CLEAN: copy_ into the static input, outside the graph
            self.static_x[n:].zero_()
            self.graph.replay()
            scores = self.static_scores[:n].cpu().numpy()  # CLEAN: read back after the replay
            idx = self.static_idx[:n].cpu().numpy().astype(np.int32)
            tags = np.asarray(self.tag_ids, dtype=np.int32)[idx]
            out = [
                pb_utils.Tensor("SCORES", scores.astype(np.float32)),
                pb_utils.Tensor("TAGS", tags),
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=out))
        return responses

    def finalize(self):
        self.graph.reset()
        self.logger.log_info("tagger graph released")
