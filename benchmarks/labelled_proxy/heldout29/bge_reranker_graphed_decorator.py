"""BGE-reranker-style cross-encoder served behind a capture-on-first-call decorator.

`@cuda_graphed` copies the tensor arguments into static buffers, warms the
method up on a side stream, captures it on the first call and replays it after
that. Query/passage pairs are padded to a fixed length; Platt scaling turns
logits into calibrated relevance probabilities.
"""
import functools
import json
import os

import numpy as np
import torch
import torch.nn as nn
from safetensors.torch import load_file


def cuda_graphed(warmup=3):
    def deco(method):
        @functools.wraps(method)
        def wrapper(self, *args):
            st = self.__dict__.setdefault("_graph_state", {})
            if "graph" not in st:
                st["inputs"] = [a.clone() for a in args]
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(warmup):
                        method(self, *st["inputs"])
                torch.cuda.current_stream().wait_stream(s)
                st["graph"] = torch.cuda.CUDAGraph()
                with torch.cuda.graph(st["graph"]):  # CLEAN: warmed up before capture
                    st["out"] = method(self, *st["inputs"])
            for buf, a in zip(st["inputs"], args):
                buf.copy_(a)  # CLEAN: copy into the static inputs
            st["graph"].replay()
            return st["out"]
        return wrapper
    return deco


class CrossEncoderReranker(nn.Module):
    def __init__(self, encoder, config):
        super().__init__()
        self.encoder, self.config = encoder, config
        self.classifier = nn.Linear(config["hidden_size"], 1)
        self.max_len = config.get("max_length", 512)
        self.instr_ids = config.get("instruction_ids", [])
        self.platt = np.array([1.0, 0.0], dtype=np.float32)

    @classmethod
    def from_pretrained(cls, path, build_encoder, device="cuda"):
        with open(os.path.join(path, "config.json")) as f:
            config = json.load(f)
        model = cls(build_encoder(config), config)
        model.load_state_dict(load_file(os.path.join(path, "model.safetensors")), strict=False)
        return model.to(device).eval()

    @torch.inference_mode()
    @cuda_graphed(warmup=3)
    def score(self, input_ids, attention_mask):
        if self.instr_ids:
            instr = torch.tensor(self.instr_ids, device=input_ids.device)  # HAZARD: host-sync
            input_ids = torch.cat([input_ids[:, :1], instr.expand(input_ids.shape[0], -1), input_ids[:, 1:-len(self.instr_ids)]], 1)
        h = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[:, 0]
        logits = self.classifier(h).squeeze(-1).float()
        if (attention_mask.sum(1) == self.max_len).any():  # HAZARD: dynamic-control-flow
            logits = logits - 0.1
        platt = torch.from_numpy(self.platt).to(logits.device)  # HAZARD: pinned-memory
        return torch.sigmoid(platt[0] * logits + platt[1])


class RerankService:
    def __init__(self, model, tokenizer, batch_size=32):
        self.model, self.tok, self.batch_size = model, tokenizer, batch_size

    def calibrate(self, a, b):
        self.model.platt[:] = (a, b)

    def rerank(self, query, passages, top_k=10):
        all_scores = []
        for i in range(0, len(passages), self.batch_size):
            chunk = passages[i: i + self.batch_size]
            chunk = chunk + [""] * (self.batch_size - len(chunk))
            enc = self.tok([query] * self.batch_size, chunk, padding="max_length", truncation="only_second",  # CLEAN: fixed padded shape for the graph
                           max_length=self.model.max_len, return_tensors="pt").to("cuda")
            all_scores.append(self.model.score(enc.input_ids, enc.attention_mask))  # HAZARD: static-address
        scores = torch.cat(all_scores)[: len(passages)].tolist()  # CLEAN: host read after the replays
        order = sorted(range(len(passages)), key=lambda j: -scores[j])[:top_k]
        return [(passages[j], scores[j]) for j in order]
