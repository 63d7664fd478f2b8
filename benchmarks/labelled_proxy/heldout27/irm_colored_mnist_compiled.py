"""IRMv1 on Colored MNIST (Arjovsky et al. 2019), following the reference
colored_mnist/main.py; the MLP is compiled with backend="cudagraphs"."""
import argparse
import numpy as np
import torch
from torch import nn, optim, autograd
from torchvision import datasets

parser = argparse.ArgumentParser(description="Colored MNIST")
parser.add_argument("--hidden_dim", type=int, default=390)
parser.add_argument("--l2_regularizer_weight", type=float, default=0.00110794568)
parser.add_argument("--lr", type=float, default=0.0004898536566546834)
parser.add_argument("--penalty_anneal_iters", type=int, default=190)
parser.add_argument("--penalty_weight", type=float, default=91257.18613115903)
parser.add_argument("--steps", type=int, default=501)
parser.add_argument("--dropout", type=float, default=0.2)
parser.add_argument("--grayscale_model", action="store_true")
parser.add_argument("--drop_color_at_test", type=bool, default=True, help="ablation: zero the green channel in eval")
flags = parser.parse_args()

mnist = datasets.MNIST("~/datasets/mnist", train=True, download=True)
mnist_train, mnist_val = (mnist.data[:50000], mnist.targets[:50000]), (mnist.data[50000:], mnist.targets[50000:])

def make_environment(images, labels, e):
    def torch_bernoulli(p, size):
        return (torch.rand(size) < p).float()
    images = images.reshape((-1, 28, 28))[:, ::2, ::2]
    labels = torch.logical_xor((labels < 5).float(), torch_bernoulli(0.25, len(labels))).float()
    colors = torch.logical_xor(labels, torch_bernoulli(e, len(labels))).float()
    images = torch.stack([images, images], dim=1)
    images[torch.tensor(range(len(images))), (1 - colors).long(), :, :] *= 0  # CLEAN: environments are built eagerly on the CPU
    return {"images": (images.float() / 255.).cuda(), "labels": labels[:, None].cuda()}

envs = [make_environment(mnist_train[0][::2], mnist_train[1][::2], 0.2),
        make_environment(mnist_train[0][1::2], mnist_train[1][1::2], 0.1),
        make_environment(mnist_val[0], mnist_val[1], 0.9)]

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1, self.lin2, self.lin3 = nn.Linear(2 * 14 * 14, flags.hidden_dim), nn.Linear(flags.hidden_dim, flags.hidden_dim), nn.Linear(flags.hidden_dim, 1)
        self.p_drop = flags.dropout

    def forward(self, input):
        if flags.drop_color_at_test and not self.training:
            input[:, 1].zero_()  # HAZARD: static-address
        out = input.view(input.shape[0], 2, 14 * 14).sum(dim=1) if flags.grayscale_model else input.view(input.shape[0], 2 * 14 * 14)
        out = nn.functional.relu(self.lin1(out))
        out = nn.functional.dropout(out, p=self.p_drop, training=self.training)  # HAZARD: python-scalar
        return self.lin3(nn.functional.relu(self.lin2(out)))

def mean_nll(logits, y):
    return nn.functional.binary_cross_entropy_with_logits(logits, y)

def mean_accuracy(logits, y):
    return (((logits > 0.).float() - y).abs() < 1e-2).float().mean()

def penalty(logits, y):
    scale = torch.tensor(1.).cuda().requires_grad_()  # CLEAN: eager, outside the compiled MLP
    grad = autograd.grad(mean_nll(logits * scale, y), [scale], create_graph=True)[0]
    return torch.sum(grad ** 2)

mlp_raw = MLP().cuda()
mlp = torch.compile(mlp_raw, backend="cudagraphs")
optimizer = optim.Adam(mlp_raw.parameters(), lr=flags.lr)
for step in range(flags.steps):
    mlp.train()
    for env in envs[:2]:
        logits = mlp(env["images"])
        env["nll"], env["acc"], env["penalty"] = mean_nll(logits, env["labels"]), mean_accuracy(logits, env["labels"]), penalty(logits, env["labels"])
    train_nll = torch.stack([envs[0]["nll"], envs[1]["nll"]]).mean()
    train_penalty = torch.stack([envs[0]["penalty"], envs[1]["penalty"]]).mean()
    weight_norm = sum(w.norm().pow(2) for w in mlp_raw.parameters())
    penalty_weight = flags.penalty_weight if step >= flags.penalty_anneal_iters else 1.0  # CLEAN: used only in eager loss arithmetic
    loss = train_nll.clone() + flags.l2_regularizer_weight * weight_norm + penalty_weight * train_penalty
    if penalty_weight > 1.0:
        loss /= penalty_weight
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step == flags.penalty_anneal_iters:
        mlp_raw.p_drop = 0.0
    if step % 100 == 0:
        mlp.eval()
        with torch.no_grad():
            for env in envs:
                test_acc = mean_accuracy(mlp(env["images"]), env["labels"])  # HAZARD: dynamic-shape
        print(np.int32(step), train_nll.detach().cpu().numpy(), test_acc.detach().cpu().numpy())  # CLEAN: host read in eager code
