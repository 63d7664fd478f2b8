"""A-GEM (Chaudhry et al., ICLR 2019) on Split CIFAR-100, multi-head, GEM-repo
style; from the second task on, `observe` is captured once and replayed."""
import argparse
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser(description="Continuum learning")
parser.add_argument("--n_tasks", type=int, default=20)
parser.add_argument("--n_memories", type=int, default=256)
parser.add_argument("--mem_batch", type=int, default=256)
parser.add_argument("--lr", type=float, default=0.03)
parser.add_argument("--batch_size", type=int, default=10)
parser.add_argument("--n_epochs", type=int, default=1)
args = parser.parse_args()

def store_grad(params, grads, grad_dims, tid):
    grads[:, tid].fill_(0.0)
    cnt = 0
    for param in params():
        if param.grad is not None:
            beg = 0 if cnt == 0 else sum(grad_dims[:cnt])
            grads[beg:beg + grad_dims[cnt], tid].copy_(param.grad.data.view(-1))  # CLEAN: slice bounds are fixed Python ints from parameter sizes
        cnt += 1

def overwrite_grad(params, newgrad, grad_dims):
    cnt = 0
    for param in params():
        if param.grad is not None:
            beg = 0 if cnt == 0 else sum(grad_dims[:cnt])
            param.grad.data.copy_(newgrad[beg:beg + grad_dims[cnt]].view_as(param.grad))
        cnt += 1

class AGEM(nn.Module):
    def __init__(self, net, n_inputs, n_outputs):
        super().__init__()
        self.net, self.n_outputs, self.nc_per_task = net, n_outputs, n_outputs // args.n_tasks
        self.opt = torch.optim.SGD(self.parameters(), args.lr)
        self.memory_data = torch.zeros(args.n_tasks, args.n_memories, n_inputs, device="cuda")
        self.memory_labs = torch.zeros(args.n_tasks, args.n_memories, dtype=torch.long, device="cuda")
        self.grad_dims = [p.numel() for p in self.parameters()]
        self.grads = torch.zeros(sum(self.grad_dims), 2, device="cuda")
        self.mem_gen = torch.Generator(device="cuda")
        self.cur_task, self.n_seen, self.mem_cnt = 0, 0, 0

    def forward(self, x, t):
        output = self.net(x)
        offset1, offset2 = t * self.nc_per_task, (t + 1) * self.nc_per_task
        if offset1 > 0:
            output[:, :offset1].data.fill_(-10e10)
        if offset2 < self.n_outputs:
            output[:, offset2:].data.fill_(-10e10)
        return output

    def observe(self, x, y):
        t = self.cur_task  # HAZARD: python-scalar
        self.n_seen += x.size(0)  # HAZARD: host-code
        self.zero_grad(set_to_none=False)
        idx = torch.randint(0, t * args.n_memories, (args.mem_batch,), device=x.device, generator=self.mem_gen)  # HAZARD: rng
        mx, my = self.memory_data[:t].reshape(-1, x.size(1))[idx], self.memory_labs[:t].reshape(-1)[idx]  # CLEAN: gather with CUDA indices
        F.cross_entropy(self.net(mx), my).backward()
        store_grad(self.parameters, self.grads, self.grad_dims, 1)
        self.zero_grad(set_to_none=False)
        loss = F.cross_entropy(self.forward(x, t), y)
        loss.backward()
        store_grad(self.parameters, self.grads, self.grad_dims, 0)
        dotp = torch.dot(self.grads[:, 0], self.grads[:, 1])
        if dotp < 0:  # HAZARD: dynamic-control-flow
            ref_mag = torch.dot(self.grads[:, 1], self.grads[:, 1])
            self.grads[:, 0] -= (dotp / ref_mag) * self.grads[:, 1]
            overwrite_grad(self.parameters, self.grads[:, 0], self.grad_dims)
        self.opt.step()
        return loss

    @torch.no_grad()
    def remember(self, x, y):
        t, bsz = self.cur_task, x.size(0)
        endcnt = min(self.mem_cnt + bsz, args.n_memories)
        self.memory_data[t, self.mem_cnt:endcnt].copy_(x[: endcnt - self.mem_cnt])  # CLEAN: eager memory write between replays
        self.memory_labs[t, self.mem_cnt:endcnt].copy_(y[: endcnt - self.mem_cnt])
        self.mem_cnt = 0 if endcnt == args.n_memories else endcnt

def run(model, tasks):
    graph = None
    for t, (xs, ys) in enumerate(tasks):
        model.cur_task, model.mem_cnt = t, 0
        for epoch in range(args.n_epochs):
            for i in range(0, xs.size(0), args.batch_size):
                x, y = xs[i:i + args.batch_size], ys[i:i + args.batch_size]
                if t == 0:
                    model.zero_grad(); F.cross_entropy(model(x, 0), y).backward(); model.opt.step()
                elif graph is None:
                    static_x, static_y = x.clone(), y.clone()
                    side = torch.cuda.Stream(); side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(side):
                        for _ in range(3):
                            model.observe(static_x, static_y)
                    torch.cuda.current_stream().wait_stream(side)
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        model.observe(static_x, static_y)
                else:
                    static_x.copy_(x); static_y.copy_(y)  # CLEAN: copy_ into the captured inputs
                    graph.replay()
                model.remember(x, y)
