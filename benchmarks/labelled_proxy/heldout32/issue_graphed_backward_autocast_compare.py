# "make_graphed_callables doesn't turn off autocast for backward"
# (pytorch#120930), extended with the two shortcuts I tried first. The
# candidate graphed with cache_enabled=False matches eager within bf16
# tolerance once DEBUG=0 (the debug print breaks graphing); my shortcuts either
# refuse to graph or drift after I rescale.
import os

import torch
from torch.cuda.graphs import make_graphed_callables
from torch.testing import assert_close

DEBUG = os.environ.get("DEBUG", "1") == "1"


class Repro(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 10.0
        self.proj = torch.nn.Linear(1536, 1536)

    def forward(self, a, b):
        s = self.scale  # HAZARD: python-scalar
        out = torch.bmm(a * s, self.proj(b) * s)
        if DEBUG:
            print(f"fwd absmax {out.abs().amax()}")  # HAZARD: host-sync
        return out


def inputs():
    torch.manual_seed(0)
    return (torch.randn(2, 576, 1536, device="cuda").requires_grad_(),
            torch.randn(2, 1536, 1536, device="cuda").requires_grad_())


half = torch.bfloat16
baseline, candidate, shortcut = Repro().cuda(), Repro().cuda(), Repro().cuda()
candidate.load_state_dict(baseline.state_dict())
shortcut.load_state_dict(baseline.state_dict())

with torch.autocast(device_type="cuda", dtype=half, cache_enabled=False):  # CLEAN: cache disabled, as the API requires
    candidate = make_graphed_callables(candidate, inputs())

shortcut.register_full_backward_hook(lambda m, gi, go: print("bwd hook"))  # HAZARD: api-misuse
try:
    with torch.autocast(device_type="cuda", dtype=half):  # HAZARD: autocast-cache
        shortcut = make_graphed_callables(shortcut, inputs())
except (RuntimeError, AssertionError) as e:
    print("shortcut refused:", e)

# compare forward + backward; backward outside autocast, as the AMP docs say
a0, b0 = inputs()
a1, b1 = inputs()
with torch.autocast(device_type="cuda", dtype=half):  # CLEAN: eager baseline, nothing is captured here
    ref = baseline(a0, b0)
with torch.autocast(device_type="cuda", dtype=half, cache_enabled=False):
    got = candidate(a1, b1)  # CLEAN: positional tensors
ref.float().sum().backward()
got.float().sum().backward()
assert_close(got.float(), ref.float(), rtol=2e-2, atol=2e-2)  # CLEAN: eager comparison outside any capture
assert_close(a1.grad, a0.grad, rtol=2e-2, atol=2e-2)

# later experiment: sweep the scale without re-graphing
for sc in (5.0, 20.0):
    baseline.scale = sc
    candidate.scale = sc
    a0, b0 = inputs()
    a1, b1 = inputs()
    with torch.autocast(device_type="cuda", dtype=half, cache_enabled=False):
        diff = (candidate(a1, b1).float() - baseline(a0, b0).float()).abs().max()
    print(sc, "max diff", diff.item())
