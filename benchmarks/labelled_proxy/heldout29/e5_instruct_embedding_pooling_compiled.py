"""E5-instruct-style text embeddings with prompt-excluded mean pooling.

The transformer + pooling head is compiled with options={"triton.cudagraphs": True}.
Queries carry a task instruction that must not be pooled (sentence-transformers'
`include_prompt=False`); passages are encoded in length-sorted batches.
"""
import logging

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

logger = logging.getLogger(__name__)
INSTRUCTIONS = {
    "retrieval": "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery: ",
    "sts": "Instruct: Retrieve semantically similar text.\nQuery: ",
}


class PooledEncoder(nn.Module):
    def __init__(self, backbone, pooling_mode="mean"):
        super().__init__()
        self.backbone, self.pooling_mode = backbone, pooling_mode
        self.prompt_length = 0

    def forward(self, input_ids, attention_mask):
        h = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        n_cut = int(attention_mask[:, -1].sum())  # HAZARD: host-sync
        if n_cut:
            logger.warning("%d inputs hit max_seq_length and were truncated", n_cut)  # HAZARD: host-code
        mask = attention_mask.clone()
        mask[:, : self.prompt_length] = 0  # HAZARD: python-scalar
        if self.pooling_mode == "lasttoken":
            last = attention_mask.sum(dim=1) - 1
            emb = h[torch.arange(h.shape[0], device=h.device), last]  # CLEAN: gather with CUDA index tensors
        else:
            m = mask.unsqueeze(-1).to(h.dtype)
            emb = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)  # CLEAN: masked mean without boolean indexing
        return F.normalize(emb, p=2, dim=-1)


class EmbeddingModel:
    def __init__(self, backbone, tokenizer, device="cuda", max_seq_length=512):
        self.tok, self.device, self.max_seq_length = tokenizer, device, max_seq_length
        self.encoder = PooledEncoder(backbone).to(device).eval()
        self.encode_fn = torch.compile(self.encoder, options={"triton.cudagraphs": True})

    def _set_prompt(self, prompt):
        self.encoder.prompt_length = len(self.tok(prompt, add_special_tokens=False).input_ids) + 1 if prompt else 0

    @torch.inference_mode()
    def encode_queries(self, queries, task="retrieval"):
        prompt = INSTRUCTIONS[task]
        self._set_prompt(prompt)
        enc = self.tok([prompt + q for q in queries], padding="max_length", max_length=96, truncation=True,
                       return_tensors="pt").to(self.device)
        emb = self.encode_fn(enc.input_ids, enc.attention_mask)  # CLEAN: one fixed padded length
        self.last_queries = emb  # HAZARD: static-address
        return emb.clone()

    @torch.inference_mode()
    def encode_corpus(self, passages, batch_size=64):
        self._set_prompt("")
        order = np.argsort([-len(p) for p in passages])
        out = []
        for i in range(0, len(passages), batch_size):
            batch = [passages[j] for j in order[i: i + batch_size]]
            enc = self.tok(["passage: " + p for p in batch], padding="longest", truncation=True,
                           max_length=self.max_seq_length, return_tensors="pt").to(self.device)
            emb = self.encode_fn(enc.input_ids, enc.attention_mask)  # HAZARD: dynamic-shape
            out.append(emb.clone())  # CLEAN: cloned before the next compiled call
        emb = torch.cat(out)[torch.as_tensor(np.argsort(order), device=self.device)]
        return emb.cpu().numpy()  # CLEAN: eager host copy after encoding

    @torch.inference_mode()
    def search(self, queries, corpus_emb, fresh_passages=(), k=10):
        self.encode_queries(queries)
        if fresh_passages:
            corpus_emb = np.concatenate([corpus_emb, self.encode_corpus(list(fresh_passages))])
        scores = self.last_queries @ torch.as_tensor(corpus_emb, device=self.device).T
        return torch.topk(scores, k=min(k, scores.shape[1]), dim=1)
