"""Spatial multiplexing of two tenants' models on one GPU, one stream per tenant.

Each tenant's model is captured on that tenant's stream and replayed there, so the
two graphs run concurrently.  The "gold" tenant has a private graph pool; the
best-effort tenants were moved onto one shared pool to save memory.
"""
import torch
import torch.nn as nn


class TenantLane:
    def __init__(self, name, model: nn.Module, in_shape, pool, priority=0):
        self.name = name
        self.model = model.cuda().eval()
        self.stream = torch.cuda.Stream(priority=priority)
        self.static_in = torch.zeros(in_shape, device="cuda")
        self.pool = pool
        self.graph = torch.cuda.CUDAGraph()
        self.done = torch.cuda.Event()
        self.quota = 1.0
        self.calibration = torch.ones(1, device="cuda")

    def body(self):
        logits = self.model(self.static_in)
        q = self.quota  # HAZARD: python-scalar
        scaled = logits * self.calibration * q
        return torch.softmax(scaled, dim=-1)

    @torch.no_grad()
    def capture(self, extra_body=None):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            for _ in range(3):
                self.body()
        torch.cuda.current_stream().wait_stream(self.stream)
        body = extra_body or self.body
        with torch.cuda.graph(self.graph, pool=self.pool, stream=self.stream):  # HAZARD: memory
            self.static_out = body()

    def launch(self, x):
        with torch.cuda.stream(self.stream):  # CLEAN: eager replay on the tenant stream, outside capture
            self.static_in.copy_(x, non_blocking=True)
            self.graph.replay()
            self.done.record(self.stream)

    def collect(self):
        self.done.synchronize()  # CLEAN: host wait after replay
        return self.static_out.clone()


class Multiplexer:
    def __init__(self, gold_model, be_models, in_shape):
        self.gold = TenantLane("gold", gold_model, in_shape, pool=torch.cuda.graph_pool_handle(), priority=-1)  # CLEAN: private pool
        shared = torch.cuda.graph_pool_handle()
        self.best_effort = [TenantLane(f"be{i}", m, in_shape, pool=shared) for i, m in enumerate(be_models)]

    def _be_body_with_audit(self, lane):
        def body():
            probs = lane.body()
            top = probs.max(dim=-1).values
            torch.cuda.synchronize()  # HAZARD: host-sync
            lane.audit_row = top[:4].cpu()  # HAZARD: host-sync
            return probs
        return body

    def build(self, audit=False):
        self.gold.capture()
        for lane in self.best_effort:
            lane.capture(self._be_body_with_audit(lane) if audit else None)

    @torch.no_grad()
    def serve(self, gold_x, be_xs):
        self.gold.launch(gold_x)
        for lane, x in zip(self.best_effort, be_xs):
            lane.launch(x)
        return self.gold.collect(), [lane.collect() for lane in self.best_effort]

    def rebalance(self, gold_load: float):
        for lane in self.best_effort:
            lane.quota = max(0.25, 1.0 - gold_load)
        self.gold.calibration.fill_(1.0 + 0.1 * gold_load)  # CLEAN: device tensor updated in place
