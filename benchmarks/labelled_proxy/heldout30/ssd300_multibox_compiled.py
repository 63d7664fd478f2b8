# SSD300 on VOC (amdegroot/ssd.pytorch, 2017, torch 0.3/0.4). The MultiBoxLoss module is compiled with
# triton.cudagraphs; prior matching stays the old eager per-image loop. TODO: drop Variable after 2.x.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable

VARIANCE = [0.1, 0.2]


def point_form(p):
    return torch.cat([p[:, :2] - p[:, 2:] / 2, p[:, :2] + p[:, 2:] / 2], 1)


def jaccard(a, b):
    lt, rb = torch.max(a[:, None, :2], b[None, :, :2]), torch.min(a[:, None, 2:], b[None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(2)
    area = lambda x: ((x[:, 2] - x[:, 0]) * (x[:, 3] - x[:, 1]))
    return inter / (area(a)[:, None] + area(b)[None] - inter)


def match(threshold, truths, priors, labels, loc_t, conf_t, idx):
    overlaps = jaccard(truths, point_form(priors))
    best_prior_idx = overlaps.max(1).indices
    best_truth_overlap, best_truth_idx = overlaps.max(0)
    best_truth_overlap.index_fill_(0, best_prior_idx, 2)
    best_truth_idx[best_prior_idx] = torch.arange(best_prior_idx.size(0), device=truths.device)
    matches = truths[best_truth_idx]
    conf = labels[best_truth_idx] + 1
    conf[best_truth_overlap < threshold] = 0  # CLEAN: bool-mask assignment of a scalar, eager anyway
    g_cxcy = ((matches[:, :2] + matches[:, 2:]) / 2 - priors[:, :2]) / (VARIANCE[0] * priors[:, 2:])  # CLEAN: Python float constants, not an index
    g_wh = torch.log((matches[:, 2:] - matches[:, :2]) / priors[:, 2:]) / VARIANCE[1]
    loc_t[idx], conf_t[idx] = torch.cat([g_cxcy, g_wh], 1), conf


class MultiBoxLoss(nn.Module):
    def __init__(self, num_classes=21, negpos_ratio=3):
        super().__init__()
        self.num_classes, self.negpos_ratio = num_classes, negpos_ratio
        self.pos_count = 0

    def forward(self, loc_data, conf_data, loc_t, conf_t):
        pos = conf_t > 0
        num_pos = pos.long().sum(1, keepdim=True)
        if num_pos.sum() == 0:  # HAZARD: dynamic-control-flow
            return loc_data.sum() * 0, conf_data.sum() * 0
        self.pos_count = num_pos.sum().item()  # HAZARD: host-sync
        loc_p = loc_data[pos]  # HAZARD: dynamic-shape
        loss_l = F.smooth_l1_loss(loc_p, loc_t[pos], reduction="sum")
        batch_conf = conf_data.view(-1, self.num_classes)
        loss_c = torch.logsumexp(batch_conf, 1) - batch_conf.gather(1, conf_t.view(-1, 1)).squeeze(1)  # CLEAN: gather with CUDA indices
        loss_c = loss_c.view(pos.size(0), -1).masked_fill(pos, 0)
        _, loss_idx = loss_c.sort(1, descending=True)
        _, idx_rank = loss_idx.sort(1)  # CLEAN: double sort for hard negatives, fixed shapes
        num_neg = torch.clamp(self.negpos_ratio * num_pos, max=pos.size(1) - 1)  # HAZARD: python-scalar
        neg = idx_rank < num_neg.expand_as(idx_rank)
        weight = (pos | neg).float().view(-1)
        loss_c = (F.cross_entropy(conf_data.view(-1, self.num_classes), conf_t.view(-1), reduction="none") * weight).sum()
        N = num_pos.sum().float()
        return loss_l / N, loss_c / N


def train(net, priors, data_loader, epochs=120):
    loss_mod = MultiBoxLoss().cuda()
    criterion = torch.compile(loss_mod, options={"triton.cudagraphs": True})
    optimizer = torch.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9, weight_decay=5e-4)
    for epoch in range(epochs):
        loss_mod.negpos_ratio = 1 if epoch < 5 else 3
        for images, targets in data_loader:
            images = Variable(images.cuda())
            targets = [Variable(ann.cuda(), requires_grad=False) for ann in targets]
            loc, conf = net(images)
            loc_t = torch.zeros(loc.size(0), priors.size(0), 4, device="cuda")
            conf_t = torch.zeros(loc.size(0), priors.size(0), dtype=torch.long, device="cuda")
            for idx in range(loc.size(0)):
                match(0.5, targets[idx][:, :-1], priors, targets[idx][:, -1].long(), loc_t, conf_t, idx)  # CLEAN: ragged targets handled eagerly
            loss_l, loss_c = criterion(loc, conf, loc_t, conf_t)
            optimizer.zero_grad()
            (loss_l + loss_c).backward()
            optimizer.step()
        print("epoch %d loc %.4f conf %.4f" % (epoch, loss_l.item(), loss_c.item()))
