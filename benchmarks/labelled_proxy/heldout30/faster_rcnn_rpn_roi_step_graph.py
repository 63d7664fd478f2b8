# Faster R-CNN step from a faster-rcnn.pytorch fork (2018, torch 0.4): RPN, ROI sampling, head,
# backward and SGD are captured once at the padded size and replayed. TODO: remove the Variable wrappers after the 2.x migration.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable
from torchvision.ops import roi_align

cfg = dict(FG_THRESH=0.5, BATCH_SIZE=128, FG_FRACTION=0.25, LR=1e-3, GAMMA=0.1,
           LR_DECAY_STEP=50000, BBOX_NORMALIZE_STDS=(0.1, 0.1, 0.2, 0.2), POOL=7)


class FasterRCNN(nn.Module):
    def __init__(self, n_classes=21, n_anchors=9):
        super().__init__()
        self.base = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(True), nn.MaxPool2d(2),
                                  nn.Conv2d(64, 256, 3, padding=1), nn.ReLU(True), nn.MaxPool2d(2),
                                  nn.Conv2d(256, 512, 3, padding=1), nn.ReLU(True), nn.MaxPool2d(4))
        self.rpn_conv = nn.Conv2d(512, 512, 3, padding=1)
        self.rpn_cls = nn.Conv2d(512, n_anchors * 2, 1)
        self.rpn_bbox = nn.Conv2d(512, n_anchors * 4, 1)
        self.head = nn.Sequential(nn.Linear(512 * cfg["POOL"] ** 2, 1024), nn.ReLU(True), nn.Dropout(0.5))
        self.cls_score = nn.Linear(1024, n_classes)
        self.bbox_pred = nn.Linear(1024, n_classes * 4)
        self.bbox_stds = torch.cuda.FloatTensor(cfg["BBOX_NORMALIZE_STDS"])  # CLEAN: legacy ctor from a list runs once in __init__, outside the capture

    def sample_rois(self, rois, gt_boxes):
        ious = box_iou(rois[:, 1:], gt_boxes[:, :4])
        max_overlaps, gt_assign = ious.max(1)
        labels = torch.where(max_overlaps >= cfg["FG_THRESH"], gt_boxes[gt_assign, 4], torch.zeros_like(max_overlaps))  # CLEAN: torch.where keeps a fixed shape
        fg_inds = torch.nonzero(max_overlaps >= cfg["FG_THRESH"]).view(-1)  # HAZARD: dynamic-shape
        fg_quota = int(cfg["BATCH_SIZE"] * cfg["FG_FRACTION"])  # HAZARD: python-scalar
        n_fg = min(fg_quota, fg_inds.numel())
        keep = torch.cat([fg_inds[:n_fg], torch.arange(cfg["BATCH_SIZE"] - n_fg, device=rois.device)])
        return rois[keep], labels[keep].long(), gt_boxes[gt_assign[keep], :4]

    def forward(self, im_data, gt_boxes, anchors):
        H, W = im_data.shape[-2:]
        im_info = torch.from_numpy(np.array([[H, W, 1.0]], dtype=np.float32)).cuda()  # HAZARD: pinned-memory
        feat = self.base(im_data)
        rpn = F.relu(self.rpn_conv(feat), inplace=True)
        scores = self.rpn_cls(rpn).permute(0, 2, 3, 1).reshape(-1, 2)
        deltas = self.rpn_bbox(rpn).permute(0, 2, 3, 1).reshape(-1, 4)
        proposals = clip_boxes(apply_deltas(anchors, deltas.detach()), H, W) * im_info[0, 2]
        top = scores[:, 1].detach().topk(2000).indices
        rois = torch.cat([torch.zeros(2000, 1, device=im_data.device), proposals[top]], 1)
        rois, labels, targets = self.sample_rois(rois, gt_boxes[0])
        pooled = roi_align(feat, rois, cfg["POOL"], spatial_scale=1.0 / 16)
        fc = self.head(pooled.flatten(1))
        cls_loss = F.cross_entropy(self.cls_score(fc), labels)
        box = self.bbox_pred(fc).view(-1, 21, 4).gather(1, labels.view(-1, 1, 1).expand(-1, 1, 4)).squeeze(1)  # CLEAN: gather with CUDA indices
        box_loss = F.smooth_l1_loss(box, (targets - rois[:, 1:]) / self.bbox_stds)
        rpn_loss = F.cross_entropy(scores, (scores[:, 1] > scores[:, 0]).long())
        return rpn_loss + cls_loss + box_loss

def box_iou(a, b):
    lt = torch.max(a[:, None, :2], b[None, :, :2])
    rb = torch.min(a[:, None, 2:], b[None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(2)
    area = lambda x: (x[:, 2] - x[:, 0]) * (x[:, 3] - x[:, 1])
    return inter / (area(a)[:, None] + area(b)[None] - inter)

def apply_deltas(anchors, d):
    wh = anchors[:, 2:] - anchors[:, :2]
    ctr = anchors[:, :2] + 0.5 * wh + d[:, :2] * wh
    wh = wh * d[:, 2:].clamp(max=4.0).exp()
    return torch.cat([ctr - 0.5 * wh, ctr + 0.5 * wh], 1)


def clip_boxes(boxes, H, W):
    x = boxes[:, 0::2].clamp(0, W - 1)
    y = boxes[:, 1::2].clamp(0, H - 1)
    return torch.stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1]], 1)

def adjust_learning_rate(optimizer, decay=0.1):
    for param_group in optimizer.param_groups:
        param_group["lr"] = decay * param_group["lr"]  # HAZARD: optimizer


def train(loader, anchors, iters=70000):
    net = FasterRCNN().cuda()
    optimizer = torch.optim.SGD(net.parameters(), lr=cfg["LR"], momentum=0.9, weight_decay=5e-4)
    im_data = Variable(torch.zeros(1, 3, 608, 1008).cuda())
    gt_boxes = Variable(torch.zeros(1, 20, 5).cuda())
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            optimizer.zero_grad(set_to_none=False)
            net(im_data, gt_boxes, anchors).backward()
            optimizer.step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=False)
    with torch.cuda.graph(g):
        loss = net(im_data, gt_boxes, anchors)
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 10.0)  # CLEAN: clip_grad_norm_ stays on the device
        optimizer.step()  # CLEAN: SGD keeps no host-side step state
    for step, (img, boxes) in enumerate(loader):
        im_data.data.copy_(img)  # CLEAN: .data.copy_ into the static input
        gt_boxes.data.copy_(boxes)
        g.replay()
        if step % 100 == 0:
            print("step %d loss %.4f" % (step, loss.item()))  # CLEAN: read after replay, outside the capture
        if step == 30000:
            cfg["FG_FRACTION"] = 0.5  # fg-heavy phase for the small-object fine-tune
        if step > 0 and step % cfg["LR_DECAY_STEP"] == 0:
            adjust_learning_rate(optimizer, cfg["GAMMA"])
