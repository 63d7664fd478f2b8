"""Evaluation of a ZeRO-3 sharded 13B decoder on a single node: each layer's flat parameter
shard is all-gathered just in time, the next layer is prefetched on a side stream, and the
shards of the last layers live in CPU memory (offload). The forward is one CUDA graph."""
import torch
import torch.distributed as dist
import torch.nn.functional as F


class ShardedLayer:
    def __init__(self, numel, world, rank, offload=False, pinned=True):
        self.numel_shard = (numel + world - 1) // world
        self.gpu_shard = torch.empty(self.numel_shard, dtype=torch.bfloat16, device="cuda")
        self.full = torch.empty(self.numel_shard * world, dtype=torch.bfloat16, device="cuda")
        self.offload = offload
        if offload:
            cpu = torch.empty(self.numel_shard, dtype=torch.bfloat16)
            self.cpu_shard = cpu.pin_memory() if pinned else cpu

    def stage(self):
        if self.offload:
            self.gpu_shard.copy_(self.cpu_shard, non_blocking=True)  # HAZARD: pinned-memory

    def gather(self):
        self.stage()
        dist.all_gather_into_tensor(self.full, self.gpu_shard)


class Zero3Eval:
    def __init__(self, layers, d=5120, heads=40):
        self.layers, self.d, self.h = layers, d, heads
        self.prefetch = torch.cuda.Stream()
        self.gathers = 0
        self.ids = torch.zeros(4, 2048, dtype=torch.long, device="cuda")
        self.embed = torch.randn(32000, d, dtype=torch.bfloat16, device="cuda") * 0.02
        self.graph = torch.cuda.CUDAGraph()

    def _block(self, x, flat):
        d = self.d
        wqkv = flat[: 3 * d * d].view(3 * d, d)  # CLEAN: slices with Python-int bounds, no tensor-valued bounds
        wo = flat[3 * d * d: 4 * d * d].view(d, d)
        w1 = flat[4 * d * d: 8 * d * d].view(4 * d, d)
        w2 = flat[8 * d * d: 12 * d * d].view(d, 4 * d)
        b, t, _ = x.shape
        q, k, v = F.linear(F.rms_norm(x, (d,)), wqkv).view(b, t, 3, self.h, d // self.h).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + F.linear(a.transpose(1, 2).reshape(b, t, d), wo)
        return x + F.linear(F.silu(F.linear(F.rms_norm(x, (d,)), w1)), w2)

    def _forward(self):
        x = F.embedding(self.ids, self.embed)
        self.layers[0].gather()
        for i, layer in enumerate(self.layers):
            if i + 1 < len(self.layers):
                self.prefetch.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(self.prefetch):  # HAZARD: stream
                    self.layers[i + 1].gather()
            self.gathers += 1  # HAZARD: host-code
            x = self._block(x, layer.full)
        return F.linear(F.rms_norm(x, (self.d,)), self.embed).float().log_softmax(-1)

    @torch.no_grad()
    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._forward()
        torch.cuda.current_stream().wait_stream(side)
        dist.barrier()
        with torch.cuda.graph(self.graph):
            self.logp = self._forward()

    @torch.no_grad()
    def score(self, ids, targets):
        if ids.shape == self.ids.shape:
            self.ids = ids  # HAZARD: static-address
        else:
            self.ids.copy_(ids[:, : self.ids.shape[1]])  # CLEAN: in-place copy into the captured ids
        self.graph.replay()
        return self.logp.gather(-1, targets[..., None]).squeeze(-1).sum(-1).clone()  # CLEAN: cloned result


def build(n_layers=40, d=5120, offload_last=8, pinned=True):
    world, rank = dist.get_world_size(), dist.get_rank()
    numel = 12 * d * d
    layers = [ShardedLayer(numel, world, rank) for _ in range(n_layers - offload_last)]
    layers += [ShardedLayer(numel, world, rank, offload=True, pinned=pinned) for _ in range(offload_last)]
    return Zero3Eval(layers, d)


if __name__ == "__main__":
    dist.init_process_group("nccl")
    ev = build(pinned=False)
    ev.capture()
