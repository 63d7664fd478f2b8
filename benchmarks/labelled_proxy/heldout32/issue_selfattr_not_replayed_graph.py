# Bug report: "CUDA graph doesn't update tensor on replay"
#
# torch 2.11.0+cu130, 1x H200, driver 570.
# After g.replay() the attribute I stash in forward() still holds the old value,
# the output ignores the temperature I set afterwards, and my second attempt
# (feeding a fresh tensor) replays the old input. Eager gives the right numbers.
# (It only captures at all after I drop the `+ self.offset.cuda()` term -- with it
# capture errors out with "Cannot copy between CPU and CUDA tensors ...".)
# Expected: model.last_hidden / static_out follow the new input like eager does.
import torch
import torch.nn as nn

torch.manual_seed(0)
dev = torch.device("cuda")


class Model(nn.Module):
    def __init__(self, d_in, d_hidden, d_out):
        super().__init__()
        self.lin1 = nn.Linear(d_in, d_hidden)
        self.lin2 = nn.Linear(d_hidden, d_out)
        self.last_hidden = None
        self.temperature = 1.0
        # plain attribute, so .to(dev) leaves it on the CPU
        self.offset = torch.zeros(d_hidden)

    def forward(self, inp):
        h = self.lin1(inp) + self.offset.cuda()  # HAZARD: pinned-memory
        h = h / self.temperature  # HAZARD: python-scalar
        self.last_hidden = h  # HAZARD: static-address
        return self.lin2(torch.relu(h))


N, D_IN, HID, D_OUT = 2, 2, 4, 2
model = Model(D_IN, HID, D_OUT).to(dev)
static_in = torch.ones(N, D_IN, device=dev)

# warm-up on a side stream, exactly like the CUDA graphs section of the docs
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        model(static_in)
torch.cuda.current_stream().wait_stream(s)

g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    static_out = model(static_in)

# ---- replay with a new input -------------------------------------------
new_in = torch.ones(N, D_IN, device=dev).add_(10)
static_in.copy_(new_in)  # CLEAN: copy_ into the captured input buffer
model.temperature = 2.0
g.replay()
torch.cuda.synchronize()  # CLEAN: sync after the replay, nothing is capturing
print("graph  model.last_hidden =", model.last_hidden)
print("graph  out =", static_out.clone())  # CLEAN: cloned read after the replay

with torch.no_grad():
    ref = model(new_in)  # CLEAN: eager reference run outside the graph
print("eager  model.last_hidden =", model.last_hidden)
print("eager  out =", ref)

# ---- second attempt from the thread: hand the graph a fresh tensor -------
static_in = torch.full((N, D_IN), 3.0, device=dev)  # HAZARD: static-address
g.replay()
print("after rebinding static_in:", static_out)
print("max abs diff vs eager:", (static_out - model(static_in)).abs().max().item())
