# Child-Sum Tree-LSTM for SICK relatedness (Tai et al. 2015; treelstm.pytorch, 2017). The recursion over
# the dependency tree stays in Python; the node cell, the similarity head and Adagrad are compiled.
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class ChildSumTreeLSTM(nn.Module):
    def __init__(self, in_dim=300, mem_dim=150):
        super().__init__()
        self.mem_dim = mem_dim
        self.ioux, self.iouh = nn.Linear(in_dim, 3 * mem_dim), nn.Linear(mem_dim, 3 * mem_dim)
        self.fx, self.fh = nn.Linear(in_dim, mem_dim), nn.Linear(mem_dim, mem_dim)
        self.cell = torch.compile(self.node_forward, mode="reduce-overhead")

    def node_forward(self, inputs, child_c, child_h):
        if (child_c.abs() > 50.0).any():  # HAZARD: dynamic-control-flow
            child_c = child_c.clamp(-50.0, 50.0)
        child_h_sum = child_h.sum(0, keepdim=True)
        i, o, u = torch.split(self.ioux(inputs) + self.iouh(child_h_sum), self.mem_dim, 1)
        i, o, u = torch.sigmoid(i), torch.sigmoid(o), torch.tanh(u)
        f = torch.sigmoid(self.fh(child_h) + self.fx(inputs).repeat(child_h.size(0), 1))
        c = i * u + (f * child_c).sum(0, keepdim=True)
        return c, o * torch.tanh(c)

    def forward(self, tree, inputs):
        for child in tree.children:
            self.forward(child, inputs)
        if tree.num_children == 0:  # CLEAN: branch on the Python tree structure, in eager code
            child_c = inputs.new_zeros(1, self.mem_dim)
            child_h = inputs.new_zeros(1, self.mem_dim)
        else:
            child_c = torch.cat([x.state[0] for x in tree.children], 0)
            child_h = torch.cat([x.state[1] for x in tree.children], 0)
        tree.state = self.cell(inputs[tree.idx].unsqueeze(0), child_c, child_h)  # HAZARD: dynamic-shape
        return tree.state


class Similarity(nn.Module):
    def __init__(self, mem_dim=150, hidden=50, num_classes=5):
        super().__init__()
        self.wh, self.wp = nn.Linear(2 * mem_dim, hidden), nn.Linear(hidden, num_classes)
        self.register_buffer("scores", torch.arange(1, num_classes + 1, dtype=torch.float))

    def forward(self, lvec, rvec):
        vec = torch.cat([lvec * rvec, (lvec - rvec).abs()], 1)
        return F.log_softmax(self.wp(torch.sigmoid(self.wh(vec))), 1)


def map_label_to_target(label, num_classes=5):
    target = torch.zeros(1, num_classes)
    ceil, floor = int(math.ceil(label)), int(math.floor(label))
    if ceil == floor:
        target[0, floor - 1] = 1  # CLEAN: Python indexing of a CPU tensor in eager data prep
    else:
        target[0, floor - 1], target[0, ceil - 1] = ceil - label, label - floor
    return target.cuda()


tree_lstm, sim = ChildSumTreeLSTM().cuda(), Similarity().cuda()
sim_c = torch.compile(sim, mode="reduce-overhead")
params = list(tree_lstm.parameters()) + list(sim.parameters())
optimizer = torch.optim.Adagrad(params, lr=0.025, weight_decay=1e-4)
opt_step = torch.compile(optimizer.step, mode="reduce-overhead")


@torch.compile(mode="reduce-overhead")
def expected_score(logp):
    return torch.dot(sim.scores, logp.exp().squeeze(0)).item()  # HAZARD: host-sync


def train_epoch(dataset, emb, batch=25, best=None):
    total, preds = 0.0, []
    for k, (ltree, lsent, rtree, rsent, label) in enumerate(dataset):
        lc, lh = tree_lstm(ltree, emb(lsent.cuda()))  # CLEAN: pageable upload in eager code, not inside a graph
        rc, rh = tree_lstm(rtree, emb(rsent.cuda()))
        logp = sim_c(lh, rh)
        loss = F.kl_div(logp, map_label_to_target(label), reduction="batchmean")
        loss.backward()
        total += loss.item()  # CLEAN: eager read after the backward, outside the compiled functions
        preds.append(expected_score(logp.detach()))
        if (k + 1) % batch == 0:
            opt_step()
            optimizer.zero_grad()
    return total / len(dataset), sum(preds) / len(preds)


def fit(train_set, emb, epochs=15):
    best = float("inf")
    for epoch in range(epochs):
        loss, mean_pred = train_epoch(train_set, emb)
        if loss > best:
            for g in optimizer.param_groups:
                g["lr"] *= 0.5  # HAZARD: optimizer
        best = min(best, loss)
        print("epoch", epoch, "train", loss, "mean predicted relatedness", mean_pred)
