"""Temporal graph network (TGN) memory module for a continuous-time interaction stream.

Each event batch (src, dst, t, msg) updates the per-node memory with a GRU cell and
refreshes a fixed-size most-recent-neighbour table used by the embedding module.
The update runs as one captured graph per fixed-size event batch.
"""
import torch
import torch.nn as nn


class TimeEncoder(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.lin = nn.Linear(1, dim)

    def forward(self, dt):
        return torch.cos(self.lin(dt.unsqueeze(-1)))


class TGNMemory:
    def __init__(self, num_nodes, mem_dim=100, msg_dim=172, time_dim=100, batch=200, n_neighbors=10):
        dev = "cuda"
        self.memory = torch.zeros(num_nodes, mem_dim, device=dev)
        self.last_update = torch.zeros(num_nodes, device=dev)
        self.nbr_table = torch.zeros(num_nodes, n_neighbors, dtype=torch.long, device=dev)
        self.time_enc = TimeEncoder(time_dim).to(dev)
        self.gru = nn.GRUCell(2 * mem_dim + time_dim + msg_dim, mem_dim).to(dev)
        self.n_neighbors = n_neighbors
        self.sample_gen = torch.Generator(device=dev)
        self.sample_gen.manual_seed(11)
        self.src = torch.zeros(batch, dtype=torch.long, device=dev)
        self.dst = torch.zeros(batch, dtype=torch.long, device=dev)
        self.t = torch.zeros(batch, device=dev)
        self.msg = torch.zeros(batch, msg_dim, device=dev)
        self.clock = 0.0
        self.graph = torch.cuda.CUDAGraph()

    @torch.no_grad()
    def _update(self):
        prev = self.last_update.index_select(0, self.src)  # CLEAN: gather with a CUDA index tensor
        dt = self.t - prev
        m = torch.cat([self.memory.index_select(0, self.src), self.memory.index_select(0, self.dst),
                       self.time_enc(dt), self.msg], -1)
        h = self.gru(m, self.memory.index_select(0, self.src))  # CLEAN: GRUCell runs on the capture stream
        new_mem = self.memory.index_copy(0, self.src, h)
        self.memory = new_mem  # HAZARD: static-address
        self.last_update.index_copy_(0, self.src, self.t)  # CLEAN: in-place write keeps the buffer address
        slot = torch.randint(0, self.n_neighbors, self.src.shape, device="cuda",
                             generator=self.sample_gen)  # HAZARD: rng
        self.nbr_table[self.src, slot] = self.dst
        newest = self.t.max().item()  # HAZARD: host-sync
        self.clock = max(self.clock, newest)
        return h

    def capture(self, warmup_batches):
        for src, dst, t, msg in warmup_batches:
            self.load(src, dst, t, msg)
            self._update()
        self.memory.zero_()
        self.last_update.zero_()
        with torch.cuda.graph(self.graph, stream=torch.cuda.current_stream()):  # HAZARD: stream
            self.out = self._update()

    def load(self, src, dst, t, msg):
        self.src.copy_(src)  # CLEAN: copy into the static event batch
        self.dst.copy_(dst)
        self.t.copy_(t)
        self.msg.copy_(msg)

    def process(self, stream_loader):
        for src, dst, t, msg in stream_loader:
            self.load(src, dst, t, msg)
            self.graph.replay()
        return self.memory

    def neighbours(self, nodes):
        return self.nbr_table.index_select(0, nodes)
