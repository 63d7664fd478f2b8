"""Group DRO (Sagawa et al., ICLR 2020) on frozen Waterbirds features: the
LossComputer of the reference code inside a CUDA-graph-captured training step."""
import argparse
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--n_groups", type=int, default=4)
parser.add_argument("--robust", type=bool, default=True)
parser.add_argument("--gamma", type=float, default=0.1)
parser.add_argument("--robust_step_size", type=float, default=0.01)
parser.add_argument("--generalization_adjustment", default="2.0")
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--weight_decay", type=float, default=1e-4)
parser.add_argument("--n_epochs", type=int, default=300)
parser.add_argument("--feat_dim", type=int, default=2048)
args = parser.parse_args()

class LossComputer:
    def __init__(self, criterion, is_robust, group_counts, step_size, gamma, adj):
        self.criterion, self.is_robust, self.step_size, self.gamma = criterion, is_robust, step_size, gamma
        self.n_groups = len(group_counts)
        self.group_counts = group_counts.cuda()
        self.adj = torch.from_numpy(adj).float().cuda()  # CLEAN: uploaded once in __init__, before any capture
        self.adv_probs = torch.ones(self.n_groups).cuda() / self.n_groups
        self.exp_avg_loss = torch.zeros(self.n_groups).cuda()
        self.exp_avg_initialized = torch.zeros(self.n_groups).cuda()
        self.processed_data_counts = torch.zeros(self.n_groups).cuda()
        self.batch_count = 0

    def loss(self, yhat, y, group_idx):
        per_sample_losses = self.criterion(yhat, y)
        group_loss, group_count = self.compute_group_avg(per_sample_losses, group_idx)
        self.update_exp_avg_loss(group_loss, group_count)
        if self.is_robust:
            actual_loss = self.compute_robust_loss(group_loss)
        else:
            actual_loss = per_sample_losses.mean()
        self.processed_data_counts += group_count  # CLEAN: in-place add into a persistent device tensor
        self.batch_count += 1  # HAZARD: host-code
        return actual_loss

    def compute_robust_loss(self, group_loss):
        adjusted_loss = group_loss
        if torch.all(self.adj > 0):  # HAZARD: dynamic-control-flow
            adjusted_loss = adjusted_loss + self.adj / torch.sqrt(self.group_counts)
        self.adv_probs = F.normalize(self.adv_probs * torch.exp(self.step_size * adjusted_loss.data), p=1, dim=0)  # HAZARD: static-address
        return group_loss @ self.adv_probs

    def compute_group_avg(self, losses, group_idx):
        group_map = (group_idx == torch.arange(self.n_groups).unsqueeze(1).long().cuda()).float()  # HAZARD: pinned-memory
        group_count = group_map.sum(1)
        group_denom = group_count + (group_count == 0).float()  # CLEAN: device-side guard instead of a host branch
        return (group_map @ losses.view(-1)) / group_denom, group_count

    def update_exp_avg_loss(self, group_loss, group_count):
        prev_weights = (1 - self.gamma * (group_count > 0).float()) * (self.exp_avg_initialized > 0).float()
        self.exp_avg_loss.mul_(prev_weights).add_(group_loss * (1 - prev_weights))  # CLEAN: updated in place, address kept
        self.exp_avg_initialized.add_((group_count > 0).float()).clamp_(max=1)

    def log_stats(self):
        return {f"avg_loss_group:{g}": self.exp_avg_loss[g].item() for g in range(self.n_groups)}  # CLEAN: read on the host after the replays

def build(train_groups):
    model = nn.Linear(args.feat_dim, 2).cuda()
    counts = torch.from_numpy(np.bincount(train_groups, minlength=args.n_groups)).float()
    adj = np.array([float(c) for c in args.generalization_adjustment.split(",")] * args.n_groups)[:args.n_groups]
    lc = LossComputer(nn.CrossEntropyLoss(reduction="none"), args.robust, counts, args.robust_step_size, args.gamma, adj)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=args.weight_decay)  # CLEAN: SGD keeps no host-side step count
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, "min", factor=0.1, patience=5)
    return model, lc, opt, sched

def capture_step(model, lc, opt, x, y, g):
    def step():
        opt.zero_grad(set_to_none=False)
        loss = lc.loss(model(x), y, g)
        loss.backward()
        opt.step()
        return loss
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = step()
    return graph, static_loss

def train(feats, labels, groups, val_fn):
    model, lc, opt, sched = build(groups.cpu().numpy())
    x, y, g = feats[:128].clone(), labels[:128].clone(), groups[:128].clone()
    graph, static_loss = capture_step(model, lc, opt, x, y, g)
    for epoch in range(args.n_epochs):
        perm = torch.randperm(feats.size(0), device=feats.device)
        for i in range(0, feats.size(0) - 127, 128):
            idx = perm[i:i + 128]
            x.copy_(feats[idx]); y.copy_(labels[idx]); g.copy_(groups[idx])
            graph.replay()
        sched.step(val_fn(model))  # HAZARD: optimizer
        print(epoch, lc.log_stats())
