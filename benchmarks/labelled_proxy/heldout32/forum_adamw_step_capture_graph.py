# Forum thread: "RuntimeError: Attempting CUDA graph capture of step() for an
# instance of AdamW but param_groups' capturable is False"
#
# I took the whole-network example from the "Accelerating PyTorch with CUDA
# Graphs" post and only swapped SGD for AdamW + a cosine schedule.
# Attempt 1 dies at capture. Attempt 2 (capturable=True, as suggested in the
# replies) captures fine but the loss curve looks like the LR never decays.
import torch
import torch.nn as nn

N, D_in, H, D_out = 640, 4096, 2048, 1024
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(D_in, H), nn.Dropout(p=0.2),
                      nn.Linear(H, D_out), nn.Dropout(p=0.1)).cuda()
loss_fn = nn.MSELoss()
real_inputs = [torch.rand(N, D_in) for _ in range(20)]
real_targets = [torch.rand(N, D_out) for _ in range(20)]


def capture_step(opt):
    static_input = torch.randn(N, D_in, device="cuda")
    static_target = torch.randn(N, D_out, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss_fn(model(static_input), static_target).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)

    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_y = model(static_input)  # CLEAN: dropout draws from the default CUDA generator
        static_loss = loss_fn(static_y, static_target)
        print(f"captured loss = {static_loss}")  # HAZARD: host-sync
        static_loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # CLEAN: clipping stays on the device
        opt.step()  # HAZARD: optimizer
    return g, static_input, static_target, static_loss


# ---- attempt 1: straight from the post, AdamW with defaults --------------
opt1 = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
try:
    capture_step(opt1)
except RuntimeError as e:
    print("attempt 1 failed:", str(e).splitlines()[0])

# ---- attempt 2: capturable=True + cosine schedule ------------------------
opt2 = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01, capturable=True)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt2, T_max=len(real_inputs))
g, static_input, static_target, static_loss = capture_step(opt2)

losses = []
for data, target in zip(real_inputs[:10], real_targets[:10]):
    static_input.copy_(data)  # CLEAN: new batch copied into the captured buffer
    static_target.copy_(target)
    g.replay()
    losses.append(static_loss.item())  # CLEAN: host read after replay, stored as a float
    sched.step()  # HAZARD: optimizer

# I also tried handing the batch over directly -- then every replay reuses the last copied batch
for data, target in zip(real_inputs[10:], real_targets[10:]):
    static_input = data.cuda(non_blocking=True)  # HAZARD: static-address
    static_target.copy_(target)
    g.replay()
    losses.append(static_loss.item())

print("lr reported by the scheduler:", sched.get_last_lr())
print("losses:", [round(x, 4) for x in losses])
