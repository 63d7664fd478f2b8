"""Table structure recognition service (SPLERGE-style split model: row / column separator probabilities from
projection pooling). The inference graph is captured through a graph_capture() context manager."""
import contextlib
import logging
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("tsr")

@contextlib.contextmanager
def graph_capture(pool=None):
    g = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.graph(g, pool=pool, stream=stream):  # HAZARD: api-misuse
        yield g
    torch.cuda.current_stream().wait_stream(stream)

class ProjectionPooling(nn.Module):
    def __init__(self, c, axis):
        super().__init__()
        self.axis = axis
        self.conv = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        x = F.relu(self.conv(x))
        return x + x.mean(self.axis, keepdim=True).expand_as(x)

class SplitModel(nn.Module):
    def __init__(self, c=64):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, c, 7, 2, 3), nn.ReLU(), nn.Conv2d(c, c, 3, 2, 1), nn.ReLU())
        self.row_branch = nn.Sequential(ProjectionPooling(c, 3), ProjectionPooling(c, 3), nn.Conv2d(c, 1, 1))
        self.col_branch = nn.Sequential(ProjectionPooling(c, 2), ProjectionPooling(c, 2), nn.Conv2d(c, 1, 1))

    def forward(self, page):
        f = self.backbone(page)
        row = self.row_branch(f).mean(3)
        col = self.col_branch(f).mean(2)
        smooth = torch.ones(1, 1, 5).cuda() / 5.0  # HAZARD: pinned-memory
        row = F.conv1d(row, smooth, padding=2).sigmoid()
        col = F.conv1d(col, smooth, padding=2).sigmoid()
        return row.squeeze(1), col.squeeze(1)

class TSRService:
    def __init__(self, model, page_hw=(1024, 768), batch=4):
        self.model = model.cuda().eval()
        self.page = torch.zeros(batch, 3, *page_hw, device="cuda")
        self.pool = torch.cuda.graph_pool_handle()
        self.last_infer_ts = 0.0
        with torch.no_grad(), graph_capture(self.pool) as g:
            log.info("capturing the table split graph")  # CLEAN: plain-string log inside the capture
            self.rows, self.cols, self.first_row_seps = self._split()
        self.graph = g

    def _split(self):
        rows, cols = self.model(self.page)
        rows = rows.masked_fill(rows < 0.05, 0.0)  # CLEAN: masked_fill keeps the shape
        first_row_seps = (rows[0] > 0.5).nonzero()  # HAZARD: dynamic-shape
        self.last_infer_ts = time.perf_counter()  # HAZARD: host-code
        return rows, cols, first_row_seps

    def healthy(self, max_idle_s=30.0):
        return time.perf_counter() - self.last_infer_ts < max_idle_s

    @torch.no_grad()
    def __call__(self, pages):
        n = pages.shape[0]
        self.page[:n].copy_(pages)  # CLEAN: copy_ into the captured input
        self.graph.replay()
        tables = []
        for r, c in zip(self.rows[:n], self.cols[:n]):
            row_seps = (r > 0.5).nonzero().squeeze(1).cpu()  # CLEAN: nonzero after replay, in eager code
            col_seps = (c > 0.5).nonzero().squeeze(1).cpu()
            tables.append({"rows": row_seps.tolist(), "cols": col_seps.tolist()})
        return tables

if __name__ == "__main__":
    service = TSRService(SplitModel())
    for _ in range(10):
        print(service(torch.rand(3, 3, 1024, 768, device="cuda")), service.healthy())
