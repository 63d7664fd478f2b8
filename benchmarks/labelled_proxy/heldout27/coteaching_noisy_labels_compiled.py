"""Co-teaching (Han et al., NeurIPS 2018) on CIFAR-10 with 50% symmetric label
noise, after the bhanML reference; the two CNNs, the small-loss selection and
both Adam steps are compiled with mode="reduce-overhead"."""
import argparse
import logging
import numpy as np
import torch
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.001)
parser.add_argument("--forget_rate", type=float, default=None)
parser.add_argument("--noise_rate", type=float, default=0.5)
parser.add_argument("--num_gradual", type=int, default=10)
parser.add_argument("--exponent", type=float, default=1)
parser.add_argument("--n_epoch", type=int, default=200)
parser.add_argument("--epoch_decay_start", type=int, default=80)
parser.add_argument("--batch_size", type=int, default=128)
args = parser.parse_args()
log = logging.getLogger("coteaching")

forget_rate = args.noise_rate if args.forget_rate is None else args.forget_rate
rate_schedule = np.ones(args.n_epoch) * forget_rate
rate_schedule[:args.num_gradual] = np.linspace(0, forget_rate ** args.exponent, args.num_gradual)
mom1, mom2 = 0.9, 0.1
alpha_plan = [args.lr] * args.n_epoch
beta1_plan = [mom1] * args.n_epoch
for i in range(args.epoch_decay_start, args.n_epoch):
    alpha_plan[i] = float(args.n_epoch - i) / (args.n_epoch - args.epoch_decay_start) * args.lr
    beta1_plan[i] = mom2

def adjust_learning_rate(optimizer, epoch):
    for param_group in optimizer.param_groups:
        param_group["lr"] = alpha_plan[epoch]  # HAZARD: optimizer
        param_group["betas"] = (beta1_plan[epoch], 0.999)

@torch.compile(mode="reduce-overhead")
def loss_coteaching(y_1, y_2, t, forget_rate, noisy):
    loss_1 = F.cross_entropy(y_1, t, reduction="none")
    ind_1_sorted = torch.argsort(loss_1.detach())  # CLEAN: device argsort instead of np.argsort on the host
    loss_2 = F.cross_entropy(y_2, t, reduction="none")
    ind_2_sorted = torch.argsort(loss_2.detach())
    num_remember = int((1 - forget_rate) * y_1.size(0))  # HAZARD: python-scalar
    kept = torch.stack([ind_1_sorted[:num_remember], ind_2_sorted[:num_remember]])
    pure_ratio = 1.0 - noisy[kept].float().mean(1).cpu()  # HAZARD: host-sync
    log.debug("forget rate %.3f, pure ratios %s", forget_rate, pure_ratio)  # HAZARD: host-code
    loss_1_update = F.cross_entropy(y_1[ind_2_sorted[:num_remember]], t[ind_2_sorted[:num_remember]])  # CLEAN: index tensors live on the device
    loss_2_update = F.cross_entropy(y_2[ind_1_sorted[:num_remember]], t[ind_1_sorted[:num_remember]])
    return loss_1_update, loss_2_update, pure_ratio

def train(train_loader, epoch, cnn1, cnn2, opt1, opt2, step1, step2, noise_table):
    cnn1.train(); cnn2.train()
    adjust_learning_rate(opt1, epoch)
    adjust_learning_rate(opt2, epoch)
    pure_ratio_list = []
    for i, (images, labels, indexes) in enumerate(train_loader):
        images, labels = images.cuda(non_blocking=True), labels.cuda(non_blocking=True)
        noisy = noise_table[indexes.cuda(non_blocking=True)]  # CLEAN: eager gather outside the compiled region
        logits1 = cnn1(images)
        logits2 = cnn2(images)
        loss_1, loss_2, pure = loss_coteaching(logits1, logits2, labels, rate_schedule[epoch], noisy)  # CLEAN: logits1 read after cnn2 ran while the backward is pending
        pure_ratio_list.append(pure)
        opt1.zero_grad(); opt2.zero_grad()
        (loss_1 + loss_2).backward()
        step1(); step2()
    return pure_ratio_list

def main(cnn1, cnn2, train_dataset):
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size, shuffle=True, num_workers=4, drop_last=True, pin_memory=True)  # CLEAN: drop_last keeps every compiled call at one batch size
    cnn1 = torch.compile(cnn1.cuda(), mode="reduce-overhead")
    cnn2 = torch.compile(cnn2.cuda(), mode="reduce-overhead")
    opt1 = torch.optim.Adam(cnn1.parameters(), lr=args.lr)
    opt2 = torch.optim.Adam(cnn2.parameters(), lr=args.lr)
    step1 = torch.compile(opt1.step, mode="reduce-overhead")
    step2 = torch.compile(opt2.step, mode="reduce-overhead")
    noise_table = torch.as_tensor(train_dataset.noise_or_not == 0, device="cuda")
    for epoch in range(args.n_epoch):
        ratios = train(train_loader, epoch, cnn1, cnn2, opt1, opt2, step1, step2, noise_table)
        print(f"Epoch {epoch} pure ratio {torch.stack(ratios).mean(0).tolist()}")
