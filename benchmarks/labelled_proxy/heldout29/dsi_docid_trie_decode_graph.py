"""DSI-style generative retrieval: a T5 model decodes semantic document ids under a prefix trie.

Docids have a fixed depth, so the whole constrained greedy decode (encoder +
`depth` decoder steps) is captured as one CUDA graph per query batch size. Small
tries are densified into GPU transition tables; very large ones fall back to a
host dict trie.
"""
import torch


class DocidTrie:
    def __init__(self, docids, vocab_size, device, max_dense_states=1 << 20):
        self.children, self.n_states = [{}], 1
        for seq in docids:
            node = 0
            for tok in seq:
                if tok not in self.children[node]:
                    self.children.append({})
                    self.children[node][tok] = len(self.children) - 1
                node = self.children[node][tok]
        self.n_states = len(self.children)
        self.dense = self.n_states <= max_dense_states
        if self.dense:
            nxt = torch.zeros(self.n_states, vocab_size, dtype=torch.long)
            for s, ch in enumerate(self.children):
                for tok, child in ch.items():
                    nxt[s, tok] = child
            self.next_state = nxt.to(device)
            self.allowed = (self.next_state > 0)


class GraphedDocidDecoder:
    def __init__(self, model, trie, depth, batch_size, query_len=32, device="cuda"):
        self.model, self.trie, self.depth, self.device = model.eval(), trie, depth, device
        self.static_q = torch.zeros(batch_size, query_len, dtype=torch.long, device=device)
        self.static_mask = torch.ones_like(self.static_q)
        self.min_score = -20.0
        self.graph = None

    def _constrain(self, logits, state, generated):
        if self.trie.dense:
            allowed = self.trie.allowed.index_select(0, state)  # CLEAN: dense trie rows gathered with a CUDA index
        else:
            allowed = torch.zeros_like(logits, dtype=torch.bool)
            for b, prefix in enumerate(generated.tolist()):  # HAZARD: host-sync
                node = 0
                for tok in prefix[1:]:
                    node = self.trie.children[node][tok]
                allowed[b, list(self.trie.children[node])] = True
        return logits.masked_fill(~allowed, -float("inf"))

    def _decode(self):
        enc = self.model.encoder(input_ids=self.static_q, attention_mask=self.static_mask).last_hidden_state
        b = enc.shape[0]
        generated = torch.full((b, 1), self.model.config.decoder_start_token_id, device=self.device)
        state = torch.zeros(b, dtype=torch.long, device=self.device)
        total = torch.zeros(b, device=self.device)
        for _ in range(self.depth):
            logits = self.model(encoder_outputs=(enc,), attention_mask=self.static_mask,
                                decoder_input_ids=generated).logits[:, -1].log_softmax(-1)
            logits = self._constrain(logits, state, generated)
            score, tok = logits.max(-1)
            total = total + score
            if self.trie.dense:
                state = self.trie.next_state[state, tok]  # CLEAN: gather from the GPU transition table
            generated = torch.cat([generated, tok[:, None]], dim=1)
        keep = total > self.min_score  # HAZARD: python-scalar
        return torch.where(keep[:, None], generated[:, 1:], torch.full_like(generated[:, 1:], -1))

    @torch.inference_mode()
    def capture(self):
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):  # HAZARD: api-misuse
            self.static_out = self._decode()

    @torch.inference_mode()
    def retrieve(self, tokenizer, queries):
        enc = tokenizer(queries, padding="max_length", max_length=self.static_q.shape[1], truncation=True,
                        return_tensors="pt")
        self.static_q.copy_(enc.input_ids)  # CLEAN: copy into the static input
        self.static_mask.copy_(enc.attention_mask)
        if self.graph is None:
            self.capture()
        self.graph.replay()
        return self.static_out


def run_eval(decoder, tokenizer, query_batches, docid_to_doc, calibrated_min_score):
    all_ids = []
    for i, batch in enumerate(query_batches):
        if i == 1:
            decoder.min_score = calibrated_min_score
        all_ids.append(decoder.retrieve(tokenizer, batch))  # HAZARD: static-address
    rows = torch.cat(all_ids).tolist()  # CLEAN: host read after all replays
    return [docid_to_doc.get(tuple(r)) for r in rows]
