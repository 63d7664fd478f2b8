import bisect
from contextlib import contextmanager
from dataclasses import dataclass, replace

import torch


@dataclass
class ForwardBatch:
    input_ids: torch.Tensor
    positions: torch.Tensor
    seq_lens: torch.Tensor
    out_cache_loc: torch.Tensor
    seq_lens_sum: int = 0
    forward_mode: str = "decode"


@contextmanager
def graph_capture():
    stream = torch.cuda.Stream()
    cur = torch.cuda.current_stream()
    stream.wait_stream(cur)
    with torch.cuda.stream(stream):
        yield stream
    cur.wait_stream(stream)


class TritonAttnBackend:
    def __init__(self, max_bs: int, max_context: int):
        self.kv_indptr = torch.zeros(max_bs + 1, dtype=torch.int32, device="cuda")
        self.max_context = max_context
        self.max_seq = max_context

    def init_forward_metadata(self, fb: ForwardBatch):
        bs = fb.input_ids.shape[0]
        self.kv_indptr[1 : bs + 1].copy_(torch.cumsum(fb.seq_lens, dim=0))  # CLEAN: written in place into a preallocated buffer
        self.max_seq = int(fb.seq_lens.max().item())  # HAZARD: host-sync
        self.num_kv_splits = max(1, fb.seq_lens_sum // (bs * 256))  # HAZARD: python-scalar


class CudaGraphRunner:
    def __init__(self, model, attn: TritonAttnBackend, capture_bs=(1, 2, 4, 8, 16, 24, 32)):
        self.model, self.attn = model, attn
        self.capture_bs = sorted(capture_bs)
        self.max_bs = self.capture_bs[-1]
        self.graphs, self.output_buffers, self.static_fb = {}, {}, {}
        self.pool = None
        self.input_ids = torch.zeros(self.max_bs, dtype=torch.int64, device="cuda")
        self.positions = torch.zeros(self.max_bs, dtype=torch.int64, device="cuda")
        self.seq_lens = torch.ones(self.max_bs, dtype=torch.int32, device="cuda")
        self.out_cache_loc = torch.zeros(self.max_bs, dtype=torch.int64, device="cuda")

    def can_run(self, fb: ForwardBatch) -> bool:
        return fb.forward_mode == "decode" and fb.input_ids.shape[0] <= self.max_bs  # CLEAN: string and int comparisons on batch metadata

    def _run_once(self, fb: ForwardBatch):
        self.attn.init_forward_metadata(fb)
        logits = self.model(fb.input_ids, fb.positions, fb)
        if (fb.input_ids < 0).any():  # HAZARD: dynamic-control-flow
            logits = logits.masked_fill(fb.input_ids[:, None] < 0, 0.0)
        return logits

    def capture(self):
        with graph_capture() as stream:
            for bs in reversed(self.capture_bs):
                fb = ForwardBatch(self.input_ids[:bs], self.positions[:bs], self.seq_lens[:bs], self.out_cache_loc[:bs], seq_lens_sum=bs)
                for _ in range(2):
                    self._run_once(fb)
                    torch.cuda.synchronize()  # CLEAN: warm-up synchronization, outside the graph
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=self.pool, stream=stream):
                    out = self._run_once(fb)
                self.pool = graph.pool()
                self.graphs[bs], self.output_buffers[bs], self.static_fb[bs] = graph, out, fb  # CLEAN: static outputs stored once per graph

    def replay(self, fb: ForwardBatch):
        raw_bs = fb.input_ids.shape[0]
        bs = self.capture_bs[bisect.bisect_left(self.capture_bs, raw_bs)]
        if bs != raw_bs:
            self.seq_lens.fill_(1)
        self.input_ids[:raw_bs].copy_(fb.input_ids)
        self.positions[:raw_bs].copy_(fb.positions)
        self.seq_lens[:raw_bs].copy_(fb.seq_lens)
        self.out_cache_loc[:raw_bs].copy_(fb.out_cache_loc)
        self.static_fb[bs] = replace(self.static_fb[bs], seq_lens_sum=fb.seq_lens_sum)
        self.graphs[bs].replay()
        return self.output_buffers[bs][:raw_bs]
