# Following the "compiled optimizer + LR scheduler" recipe, but with
# mode="reduce-overhead": variant A (tensor LR, LinearLR) is fine, B and C keep
# recompiling (pytorch#163093: ReduceLROnPlateau writes a Python float into
# param_group["lr"]; pytorch#133898: OneCycleLR also cycles betas).
# TORCH_LOGS=recompiles shows guards on lr / betas. torch 2.11, H200.
import torch
import torch._dynamo
from torch import nn, optim

torch._logging.set_logs(recompiles=True)
torch._dynamo.config.recompile_limit = 64
device = "cuda"
model = nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(6)]).to(device)
x = torch.randn(256, 1024, device=device)
y = torch.randn(256, 1024, device=device)

# --- A: tensor LR + LinearLR, as in the recipe --------------------------------
opt_a = optim.AdamW(model.parameters(), lr=torch.tensor(0.01))  # CLEAN: tensor LR, no guard on its value
sched_a = optim.lr_scheduler.LinearLR(opt_a, total_iters=5)


@torch.compile(mode="reduce-overhead")
def step_a():
    opt_a.step()
    sched_a.step()  # CLEAN: tensor LR, updated in place
    print("lr now", opt_a.param_groups[0]["lr"])  # HAZARD: host-code


# --- B: ReduceLROnPlateau with a tensor LR -------------------------------------
opt_b = optim.Adam(model.parameters(), lr=torch.tensor(0.1))
sched_b = optim.lr_scheduler.ReduceLROnPlateau(opt_b, factor=0.5, patience=1, min_lr=0.001)


@torch.compile(mode="reduce-overhead")
def step_b(metric):
    opt_b.step()
    sched_b.step(metric)  # HAZARD: optimizer


# --- C: OneCycleLR (cycles betas too) -----------------------------------------
lr_c = torch.tensor(0.001, device=device)  # CLEAN: LR held in a device tensor
opt_c = optim.AdamW(model.parameters(), lr=lr_c)
sched_c = optim.lr_scheduler.OneCycleLR(opt_c, max_lr=lr_c, total_steps=1000)


@torch.compile(mode="reduce-overhead")
def step_c():
    opt_c.step()
    sched_c.step()  # HAZARD: optimizer


@torch.compile(mode="reduce-overhead")
def loss_fn(pred, target):
    loss = nn.functional.mse_loss(pred, target)
    if loss > 1e3:  # HAZARD: dynamic-control-flow
        loss = loss.clamp(max=1e3)
    return loss


fake_metrics = torch.linspace(1.0, 0.0, 8, device=device)
fake_metrics[3:6] = fake_metrics[3]
for name, step in (("A", step_a), ("B", step_b), ("C", step_c)):
    for i in range(8):
        loss = loss_fn(model(x), y)
        loss_val = loss.item()  # CLEAN: read right after the call, before anything else runs
        loss.backward()
        step(fake_metrics[i]) if name == "B" else step()
        model.zero_grad(set_to_none=True)
    print(name, "final loss", loss_val)
