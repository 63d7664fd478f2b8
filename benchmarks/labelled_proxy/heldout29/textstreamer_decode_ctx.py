"""Streaming chat decode for a Qwen2-style model with a graph-capture context manager.

`graph_capture()` forks a side stream, captures whatever runs in its body into a
CUDA graph and joins back. The decode step (static cache, sampling, stopping
criteria, streamer) is warmed up and captured once, then replayed per token.
"""
import contextlib
import time

import torch


@contextlib.contextmanager
def graph_capture(pool=None):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(g, pool=pool, stream=stream):  # CLEAN: side stream forked and joined around the capture
            yield g
    torch.cuda.current_stream().wait_stream(stream)


class QueueStreamer:
    def __init__(self, tokenizer, queue):
        self.tok, self.queue, self.buffer = tokenizer, queue, []

    def put(self, token_ids):
        self.buffer.extend(token_ids.view(-1).tolist())  # HAZARD: host-sync
        text = self.tok.decode(self.buffer, skip_special_tokens=True)
        if text.endswith((" ", "\n")):
            self.queue.put(text)
            self.buffer.clear()


class MaxTimeCriteria:
    def __init__(self, max_time_s):
        self.max_time_s, self.start = max_time_s, time.time()

    def __call__(self, input_ids):
        return time.time() - self.start > self.max_time_s  # HAZARD: host-code


class StreamingDecoder:
    def __init__(self, model, tokenizer, queue, device="cuda"):
        self.model, self.tok, self.device = model.eval(), tokenizer, device
        self.streamer = QueueStreamer(tokenizer, queue)
        self.criteria = MaxTimeCriteria(30.0)
        self.stop_ids = torch.tensor(tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"]), device=device)  # CLEAN: uploaded once, outside the capture
        self.static_tok = torch.zeros(1, 1, dtype=torch.long, device=device)
        self.static_pos = torch.zeros(1, dtype=torch.long, device=device)
        self.static_done = torch.zeros(1, dtype=torch.bool, device=device)
        self.static_temp = torch.ones((), device=device)
        self.generator, self.graph = torch.Generator(device=device), None

    def _step(self):
        logits = self.model(self.static_tok, cache_position=self.static_pos, past_key_values=self.cache).logits[:, -1]
        probs = torch.softmax(logits.float() / self.static_temp, dim=-1)  # CLEAN: temperature read from a static device tensor
        nxt = torch.multinomial(probs, 1, generator=self.generator)  # HAZARD: rng
        hit_stop = torch.isin(nxt, self.stop_ids)
        if hit_stop.any():  # HAZARD: dynamic-control-flow
            self.static_done.fill_(True)
        self.streamer.put(nxt)
        self.timed_out = self.criteria(nxt)
        self.static_tok.copy_(nxt)
        self.static_pos.add_(1)  # CLEAN: device-side position counter

    @torch.inference_mode()
    def chat(self, messages, temperature=0.7, max_new_tokens=512, seed=None):
        self.static_temp.fill_(temperature)
        if seed is not None:
            self.generator.manual_seed(seed)
        ids = self.tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt").to(self.device)
        self.cache = self.model.new_static_cache(max_len=8192) if self.graph is None else self.cache
        self.cache.reset()
        out = self.model(ids, cache_position=torch.arange(ids.shape[1], device=self.device), past_key_values=self.cache)
        self.static_tok.copy_(out.logits[:, -1:].argmax(-1))  # CLEAN: copy into the static input
        self.static_pos.fill_(ids.shape[1])
        self.static_done.zero_()
        if self.graph is None:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    self._step()
            torch.cuda.current_stream().wait_stream(s)
            with graph_capture() as g:
                self._step()
            self.graph = g
            self.static_tok.copy_(out.logits[:, -1:].argmax(-1))
            self.static_pos.fill_(ids.shape[1])
        for _ in range(max_new_tokens):
            self.graph.replay()
            if self.static_done.item() or self.timed_out:  # CLEAN: eager read after the replay
                break
