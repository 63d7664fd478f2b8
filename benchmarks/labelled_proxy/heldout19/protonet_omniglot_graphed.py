"""Prototypical Networks (Snell, Swersky & Zemel 2017) on Omniglot, 60-way 5-shot episodes.

Research code.  Every training episode has exactly the same shape (60 classes x (5 support +
5 query)), so the Conv-4 encoder is wrapped with torch.cuda.make_graphed_callables.
"""
import glob
import os
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image

N_WAY, K_SHOT, N_QUERY = 60, 5, 5
EPISODE = N_WAY * (K_SHOT + N_QUERY)

def load_omniglot(root):
    classes = []
    for alphabet in sorted(os.listdir(root)):
        for ch in sorted(os.listdir(os.path.join(root, alphabet))):
            files = sorted(glob.glob(os.path.join(root, alphabet, ch, "*.png")))
            imgs = np.stack([np.asarray(Image.open(f).convert("L").resize((28, 28)), dtype=np.float32) for f in files])
            for rot in range(4):                                # rotations count as new classes
                classes.append(np.rot90(imgs, rot, axes=(1, 2)).copy())
    return classes

def sample_episode(classes, n_way=N_WAY):
    chosen = random.sample(range(len(classes)), n_way)  # CLEAN: episode sampling is host code, outside the graphed encoder
    sup, qry = [], []
    for c in chosen:
        idx = np.random.permutation(len(classes[c]))[:K_SHOT + N_QUERY]
        sup.append(classes[c][idx[:K_SHOT]])
        qry.append(classes[c][idx[K_SHOT:]])
    x = np.concatenate([np.concatenate(sup), np.concatenate(qry)])[:, None]
    return torch.from_numpy(1.0 - x / 255.0)

def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2))

class Conv4(nn.Module):
    def __init__(self, hid=64):
        super().__init__()
        self.net = nn.Sequential(conv_block(1, hid), conv_block(hid, hid), conv_block(hid, hid), conv_block(hid, hid))
        self.noise_gen = torch.Generator(device="cuda")
        self.noise_gen.manual_seed(0)

    def forward(self, x):
        if self.training:
            x = x + 0.05 * torch.randn(x.shape, device=x.device, generator=self.noise_gen)  # HAZARD: rng
            if random.random() < 0.5:  # HAZARD: host-code
                x = x.flip(-1)
        z = self.net(x).flatten(1)
        if torch.isnan(z).any():  # HAZARD: dynamic-control-flow
            z = torch.nan_to_num(z)
        return z

def proto_loss(z, n_way=N_WAY):
    sup, qry = z[:n_way * K_SHOT], z[n_way * K_SHOT:]
    protos = sup.view(n_way, K_SHOT, -1).mean(1)
    logits = -torch.cdist(qry, protos) ** 2
    y = torch.arange(n_way, device=z.device).repeat_interleave(N_QUERY)
    return F.cross_entropy(logits, y), (logits.argmax(1) == y).float().mean()

def embed(net, images):
    return net(x=images)  # HAZARD: api-misuse

@torch.no_grad()
def validate(encoder, val_cls, n=200):
    encoder.eval()
    accs = []
    for _ in range(n):
        z = encoder(sample_episode(val_cls, n_way=20).cuda())  # CLEAN: eval mode differs from the graphed mode, so the eager forward runs (20-way shape)
        accs.append(proto_loss(z, n_way=20)[1].item())
    encoder.train()
    return float(np.mean(accs))

def main(root="omniglot/images_background", episodes=20000):
    classes = load_omniglot(root)
    train_cls, val_cls = classes[:4112], classes[4112:]
    enc = Conv4().cuda()
    opt = torch.optim.Adam(enc.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, 2000, 0.5)
    encoder = torch.cuda.make_graphed_callables(enc, (torch.zeros(EPISODE, 1, 28, 28, device="cuda"),))
    for ep in range(episodes):
        z = encoder(sample_episode(train_cls).cuda(non_blocking=True))  # CLEAN: positional call with the sampled shape
        loss, acc = proto_loss(z)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if ep % 1000 == 999:                                   # extra step on a "hard" episode from confusable alphabets
            loss_h, _ = proto_loss(embed(encoder, sample_episode(train_cls[:964]).cuda()))
            opt.zero_grad(set_to_none=True)
            loss_h.backward()
            opt.step()
        if ep % 500 == 0:
            print(f"episode {ep}  loss {loss.item():.3f}  acc {acc.item():.3f}  val {validate(encoder, val_cls, 50):.3f}")
    torch.save(enc.state_dict(), "protonet_omniglot.pt")

if __name__ == "__main__":
    main()
