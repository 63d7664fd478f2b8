"""Layer-streaming inference: MLP-block weights live in pinned host memory.

Two GPU weight slots are double-buffered: while layer i computes from slot i % 2,
the copy stream uploads layer i + 1 into the other slot.  The first `n_resident`
layers stay on the GPU.  The whole streamed forward, copies included, is captured.
"""
import torch
import torch.nn.functional as F


class StreamedMLPStack:
    def __init__(self, host_weights, resident=4, tokens=4096, d=8192, hidden=28672):
        self.host_w = [w.pin_memory() for w in host_weights]
        self.resident = [w.cuda() for w in self.host_w[:resident]]
        self.n_resident = resident
        self.slots = [torch.empty_like(self.host_w[0], device="cuda") for _ in range(2)]
        self.ready = [torch.cuda.Event() for _ in range(2)]
        self.free = [torch.cuda.Event() for _ in range(2)]
        self.copy_stream = torch.cuda.Stream()
        self.x = torch.zeros(tokens, d, dtype=torch.bfloat16, device="cuda")
        self.proj_host = torch.randn(d, d, dtype=torch.bfloat16)
        self.hidden = hidden
        self.graph = torch.cuda.CUDAGraph()

    def _mlp(self, x, w):
        up, gate, down = w[: self.hidden], w[self.hidden: 2 * self.hidden], w[2 * self.hidden:]
        return x + (F.silu(x @ gate.t()) * (x @ up.t())) @ down

    def _prefetch(self, i, slot, reuse):
        main = torch.cuda.current_stream()
        self.copy_stream.wait_stream(main)
        if reuse:
            self.copy_stream.wait_event(self.free[slot])
        with torch.cuda.stream(self.copy_stream):  # CLEAN: forked from main, joined through ready[slot]
            self.slots[slot].copy_(self.host_w[i], non_blocking=True)  # CLEAN: pinned source, recorded copy
            self.ready[slot].record(self.copy_stream)

    def forward(self):
        h = self.x
        n_res = self.n_resident  # HAZARD: python-scalar
        for w in self.resident[:n_res]:
            h = self._mlp(h, w)
        streamed = list(range(n_res, len(self.host_w)))
        if streamed:
            self._prefetch(streamed[0], 0, reuse=False)
        for k, i in enumerate(streamed):
            slot = k % 2
            if k + 1 < len(streamed):
                self._prefetch(streamed[k + 1], 1 - slot, reuse=k + 1 >= 2)
            torch.cuda.current_stream().wait_event(self.ready[slot])
            h = self._mlp(h, self.slots[slot])
            self.free[slot].record()
        proj = self.proj_host.to("cuda", non_blocking=True)  # HAZARD: pinned-memory
        torch.cuda.current_stream().synchronize()  # HAZARD: host-sync
        return h @ proj

    @torch.no_grad()
    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            self.forward()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph):
            self.out = self.forward()

    @torch.no_grad()
    def __call__(self, x):
        self.x.copy_(x)  # CLEAN: copy into the static input
        self.graph.replay()
        return self.out.clone()

    def shrink_resident(self, new_n):
        self.n_resident = new_n
        self.resident = self.resident[:new_n]

    def reload_slots(self):
        self.slots = [torch.empty_like(self.host_w[0], device="cuda") for _ in range(2)]  # HAZARD: static-address
