# The cudagraph-trees docs example that "should" raise
#   RuntimeError: Error: accessing tensor output of CUDAGraphs that has been
#   overwritten by a subsequent run.
# Collected from pytorch#144386 (doesn't raise for me!), pytorch#170604
# (mark_step_begin doesn't help) and pytorch#104435 (detach doesn't help).
# Answer from the maintainers: the docs example needs CUDA tensors; clone
# what you keep. torch 2.11, H200.
import os

import torch

os.environ.setdefault("TORCH_LOGS", "cudagraphs")


@torch.compile(mode="reduce-overhead")
def my_model(x):
    y = torch.matmul(x, x)
    return y


# 1) the report in #144386: CPU tensors, so nothing is CUDA-graphed
xc = torch.randn(10, 10)
y1 = my_model(xc)
y2 = my_model(xc)
print(y1)  # CLEAN: CPU inputs, no CUDA graph is recorded

# 2) the same thing on the GPU
x = torch.randn(10, 10, device="cuda")
y1 = my_model(x)
y2 = my_model(x)
print(y1)  # HAZARD: static-address

# 3) the error message suggests cudagraph_mark_step_begin(); #170604 / PR 177192
torch.compiler.cudagraph_mark_step_begin()
z1 = my_model(x)
torch.compiler.cudagraph_mark_step_begin()
z2 = my_model(x)
print(z1.sum())  # HAZARD: static-address

# 4) what actually works
w1 = my_model(x).clone()  # CLEAN: cloned right after the call
w2 = my_model(x)
print(torch.allclose(w1, w2))  # CLEAN: w1 is our own copy


# 5) #104435: detach() shares the storage, so it is overwritten all the same
@torch.compile(mode="reduce-overhead")
def foo(t):
    return t + 1


a = foo(torch.rand([4], device="cuda"))
b = foo(torch.rand([4], device="cuda"))
print(a.detach())  # HAZARD: static-address

# 6) bonus from the thread: a size sweep re-records a graph per size
for n in (16, 24, 32, 40, 48, 56, 64, 72, 80):
    out = my_model(torch.randn(n, n, device="cuda"))  # HAZARD: dynamic-shape
    print(n, out.norm().item())  # CLEAN: read before the next call
