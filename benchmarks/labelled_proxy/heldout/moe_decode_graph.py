import torch
import torch.nn as nn
import torch.nn.functional as F


class Expert(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.w1 = nn.Linear(d, h, bias=False)
        self.w2 = nn.Linear(h, d, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)))


class SparseMoE(nn.Module):
    def __init__(self, d_model=1024, d_ff=2816, num_experts=8, top_k=2, capacity=64):
        super().__init__()
        self.gate = nn.Linear(d_model, num_experts, bias=False)
        self.experts = nn.ModuleList([Expert(d_model, d_ff) for _ in range(num_experts)])
        self.shared_expert = Expert(d_model, d_ff)
        self.shared_stream = torch.cuda.Stream()
        self.num_experts, self.top_k, self.capacity = num_experts, top_k, capacity

    def forward(self, x):
        self.shared_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.shared_stream):  # HAZARD: stream
            shared = self.shared_expert(x)
        weights, experts = self.gate(x).softmax(-1).topk(self.top_k, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        flat = experts.flatten()
        counts = F.one_hot(flat, self.num_experts).sum(0)
        token_ids = torch.arange(x.shape[0], device=x.device).repeat_interleave(self.top_k)  # CLEAN: int repeat count gives a static output size
        split_sizes = counts.tolist()  # HAZARD: host-sync
        order = flat.argsort()
        chunks = x[token_ids[order]].split(split_sizes)
        out = torch.zeros_like(x)
        gathered = torch.cat([self.experts[e](c) for e, c in enumerate(chunks)])
        out.index_add_(0, token_ids[order], gathered * weights.flatten()[order, None])
        return out + shared

    def expert_load(self, x):
        experts = self.gate(x).topk(self.top_k, dim=-1).indices
        hit = (experts == 0).any(-1)
        rows = hit.nonzero(as_tuple=True)[0]  # HAZARD: dynamic-shape
        slots = torch.repeat_interleave(torch.arange(self.num_experts, device=x.device), torch.bincount(experts.flatten(), minlength=self.num_experts))  # HAZARD: dynamic-shape
        padded = torch.repeat_interleave(experts.flatten(), torch.ones_like(experts.flatten()), output_size=x.shape[0] * self.top_k)  # CLEAN: output_size given, no host sync
        return rows, slots, padded, x[hit]  # HAZARD: dynamic-shape


class MoEDecodeGraph:
    def __init__(self, layer: SparseMoE, batch: int, d_model: int):
        self.layer = layer
        self.hidden = torch.zeros(batch, d_model, device="cuda", dtype=torch.bfloat16)
        self.graph = torch.cuda.CUDAGraph()

    @torch.inference_mode()
    def capture(self, pool=None):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                self.layer(self.hidden)
                self.layer.expert_load(self.hidden)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(self.graph, pool=pool, stream=s):
            self.out = self.layer(self.hidden)
            self.load = self.layer.expert_load(self.hidden)

    def __call__(self, hidden):
        self.hidden.copy_(hidden)
        self.graph.replay()
        return self.out


if __name__ == "__main__":
    layer = SparseMoE().cuda().to(torch.bfloat16).eval()
    runner = MoEDecodeGraph(layer, batch=16, d_model=1024)
    runner.capture()
    print(runner(torch.randn(16, 1024, device="cuda", dtype=torch.bfloat16)).shape)
