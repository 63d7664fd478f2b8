"""Elastic Weight Consolidation on Permuted MNIST (Kirkpatrick et al. 2017) -- course project.

Task t applies a fixed pixel permutation; the MLP is shared, with a small learned task
embedding added to the first hidden layer.  Every task uses the same batch shape, so the MLP
is wrapped with torch.cuda.make_graphed_callables; the EWC penalty is added eagerly.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision import datasets, transforms

N_TASKS, BATCH, EPOCHS, LAMBDA = 5, 256, 3, 400.0
rng = np.random.RandomState(0)
PERMS = [np.arange(784)] + [rng.permutation(784) for _ in range(N_TASKS - 1)]


class MLP(nn.Module):
    def __init__(self, hidden=400):
        super().__init__()
        self.fc1 = nn.Linear(784, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, 10)
        self.task_emb = nn.Parameter(torch.zeros(N_TASKS, hidden))
        self.task_id = 0
        self.perm = PERMS[0]
        self.dead_units = 0

    def forward(self, x):
        x = x[:, torch.from_numpy(self.perm).to(x.device)]  # HAZARD: pinned-memory
        h = F.relu(self.fc1(x) + self.task_emb[self.task_id])  # HAZARD: python-scalar
        h = F.relu(self.fc2(h))
        self.dead_units = int((h.amax(0) <= 0).sum())  # HAZARD: host-sync
        return self.fc3(h)


def fisher_diag(model, loader, n_batches=20):
    fisher = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
    for i, (x, _) in enumerate(loader):
        if i == n_batches:
            break
        model.zero_grad(set_to_none=True)
        out = model(x.view(BATCH, -1).cuda())
        F.nll_loss(F.log_softmax(out, 1), out.argmax(1)).backward()     # empirical Fisher, model labels
        for n, p in model.named_parameters():
            if p.grad is not None:
                fisher[n] += p.grad.detach() ** 2 / n_batches
    return fisher


def train_task(model, loader, opt, fisher, anchors):
    for epoch in range(EPOCHS):
        for x, y in loader:
            x, y = x.view(BATCH, -1).cuda(non_blocking=True), y.cuda(non_blocking=True)
            loss = F.cross_entropy(model(x), y)
            for n, p in model.named_parameters():
                if n in fisher:
                    loss = loss + LAMBDA / 2 * (fisher[n] * (p - anchors[n]) ** 2).sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        print(f"  epoch {epoch}: loss {loss.item():.4f}")  # CLEAN: host read after backward, outside the graphed callable


def grad_norm_hook(module, grad_in, grad_out):
    module.last_grad_norm = grad_out[0].norm()


if __name__ == "__main__":
    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    train_set = datasets.MNIST(".", train=True, download=True, transform=tf)
    test_set = datasets.MNIST(".", train=False, transform=tf)
    loader = torch.utils.data.DataLoader(train_set, BATCH, shuffle=True, drop_last=True, pin_memory=True)
    test_loader = torch.utils.data.DataLoader(test_set, 1000)
    net = MLP().cuda()
    net.register_full_backward_hook(grad_norm_hook)  # HAZARD: api-misuse
    model = torch.cuda.make_graphed_callables(net, (torch.randn(BATCH, 784, device="cuda"),))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    fisher, anchors = {}, {}
    for t in range(N_TASKS):
        model.task_id, model.perm = t, PERMS[t]
        print(f"task {t}")
        train_task(model, loader, opt, fisher, anchors)
        new_f = fisher_diag(model, loader)
        for n, p in model.named_parameters():
            fisher[n] = fisher.get(n, 0) + new_f[n]
            anchors[n] = p.detach().clone()  # CLEAN: parameter snapshot is cloned
        model.eval()
        with torch.no_grad():
            for s in range(t + 1):
                model.task_id, model.perm = s, PERMS[s]
                correct = 0
                for x, y in test_loader:
                    pred = model(x.view(-1, 784).cuda()).argmax(1)  # CLEAN: eval mode runs the original (eager) forward
                    correct += (pred.cpu() == y).sum().item()
                print(f"  after task {t}: acc on task {s} = {correct / len(test_set):.4f}")
        model.train()
