# "Wrapping make_graphed_callables with autocast" (pytorch#71631), re-run on
# torch 2.11. The original repro flipped CUDA_GRAPHS between runs and compared
# the weight sums; on 2.11 the graphed run now raises during graphing, and the
# variant without the outer autocast raises on the first training step.
import os
import random

import torch

CUDA_GRAPHS = os.environ.get("CUDA_GRAPHS", "1") == "1"
torch.manual_seed(123)
random.seed(123)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.module1 = torch.nn.Conv2d(256, 256, 3, stride=1, padding=1, bias=False)
        self.module2 = torch.nn.Conv2d(256, 256, 3, stride=1, padding=1, bias=False)
        self.module3 = torch.nn.Conv2d(256, 256, 3, stride=1, padding=1, bias=False)
        self.skip_p = 0.1

    def forward(self, x):
        out = self.module1(x)
        if self.training and random.random() < self.skip_p:  # HAZARD: host-code
            return out
        out = self.module2(out)
        return self.module3(out)


def model_state(model):
    s = sum(W.sum() for name, W in model.named_parameters() if "weight" in name)
    return s.item()  # CLEAN: eager read between steps, no graph is being captured


model = Net().cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 256, 32, 32, device="cuda")
act_std = []
model.register_forward_hook(lambda m, i, o: act_std.append(o.detach().float().std()))  # HAZARD: api-misuse

print("Model init state:", model_state(model))
if CUDA_GRAPHS:
    with torch.cuda.amp.autocast():  # HAZARD: autocast-cache
        model = torch.cuda.make_graphed_callables(model, (x,))
    model.register_forward_hook(lambda m, i, o: None)  # CLEAN: hook registered after graphing

for it in range(10):
    batch = torch.randn(8, 256, 32, 32, device="cuda")
    with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):  # CLEAN: cache-free autocast around the replay
        out = model(x=batch)  # HAZARD: api-misuse
    loss = out.float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=False)
print("Model trained state:", model_state(model))

model.eval()
with torch.no_grad():
    ev = model(torch.randn(8, 256, 32, 32, device="cuda"))  # CLEAN: eval mode runs the original forward eagerly
print("eval out", ev.float().abs().mean().item())
