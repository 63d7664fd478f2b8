# From a blog post, "Deep dive into CUDAGraph.replay(): common issues and
# solutions". The post's "bad example" is claimed to fail because the input is
# new memory on every iteration. It doesn't fail: it silently trains on the
# first random batch forever. The "good example" below it is mostly right, but
# its LR decay at the end does nothing.
import torch

device = "cuda"
torch.manual_seed(0)
model = torch.nn.Linear(10, 10).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)


def bad_example():
    g = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    losses = []
    with torch.cuda.stream(stream):
        static_input = torch.randn(16, 10, device=device)
        with torch.cuda.graph(g):  # HAZARD: api-misuse
            output = model(static_input)
            loss = output.pow(2).mean()
            loss.backward()
            optimizer.step()  # CLEAN: plain SGD keeps no host-side step state
    for i in range(5):
        dynamic_input = torch.randn(16, 10, device=device)
        static_input = dynamic_input  # HAZARD: static-address
        g.replay()
        losses.append(loss)  # HAZARD: static-address
    return [l.item() for l in losses]


def good_example(batches, decay_at=50):
    static_input = torch.randn(16, 10, device=device)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            optimizer.zero_grad(set_to_none=True)
            model(static_input).pow(2).mean().backward()
            optimizer.step()
    torch.cuda.current_stream().wait_stream(s)

    g = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):  # CLEAN: captured after three warm-up steps on a side stream
        static_loss = model(static_input).pow(2).mean()
        static_loss.backward()
        optimizer.step()

    history = []
    for i, batch in enumerate(batches):
        static_input.copy_(batch)  # CLEAN: the post's fix, copy into the static input
        g.replay()
        history.append(static_loss.item())  # CLEAN: Python float taken right after the replay
        if i == decay_at:
            for group in optimizer.param_groups:
                group["lr"] = group["lr"] * 0.1  # HAZARD: optimizer
    return history


print("bad :", bad_example())
hist = good_example([torch.randn(16, 10, device=device) for _ in range(100)])
print("good:", hist[0], hist[49], hist[99])
