"""Bengali.AI Handwritten Grapheme Classification -- 3-head SE-ResNeXt baseline with CutMix.

Kaggle kernel: 137x236 crops resized to 128x128 (preprocessed to .npy), heads for 168
grapheme roots, 11 vowel and 7 consonant diacritics; metric = weighted macro recall (2:1:1).
`CompiledTrainer` swaps its step methods for CUDA-graph compiled versions in its constructor.
"""
import numpy as np
import timm
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.metrics import recall_score

HEADS = {"root": 168, "vowel": 11, "consonant": 7}
CG_OPTS = {"triton.cudagraphs": True, "max_autotune": False}
BATCH = 128


class GraphemeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = timm.create_model("seresnext26d_32x4d", pretrained=True, in_chans=1, num_classes=0)
        self.heads = nn.ModuleDict({k: nn.Linear(self.body.num_features, n) for k, n in HEADS.items()})

    def forward(self, x):
        f = self.body(x)
        return [self.heads[k](f) for k in HEADS]


def to_unit_(x):
    return x.div_(255.0)  # HAZARD: static-address


class Trainer:
    def __init__(self, model, lr=1e-3):
        self.model = model.cuda()
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr)
        self.to_unit_ = to_unit_
        self.prep = lambda x: x / 255.0

    def run(self, phase, *args):
        return getattr(self, f"{phase}_step")(*args)

    def train_step(self, x, y):
        lam = np.random.beta(1.0, 1.0)  # HAZARD: host-code
        cut = int(128 * np.sqrt(1 - lam))
        x2, y2 = x.flip(0), y.flip(0)                              # CutMix partner: the batch reversed
        x = x.clone()
        x[:, :, :cut, :cut] = x2[:, :, :cut, :cut]
        lam = 1 - cut * cut / (128 * 128)
        outs = self.model(x)
        loss = sum(w * (lam * F.cross_entropy(o, y[:, i]) + (1 - lam) * F.cross_entropy(o, y2[:, i]))
                   for i, (o, w) in enumerate(zip(outs, (2.0, 1.0, 1.0))))
        return loss / 4

    def eval_step(self, x, y):
        outs = self.model(x)
        if y[:, 0].max() >= HEADS["root"]:  # HAZARD: dynamic-control-flow
            raise ValueError("root label out of range")
        preds = torch.stack([o.argmax(1) for o in outs], 1)
        acc = (preds == y).float().mean().item()  # HAZARD: host-sync
        return preds, acc

    def fit_epoch(self, loader):
        self.model.train()
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            loss = self.run("train", self.to_unit_(x), y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()

    @torch.no_grad()
    def validate(self, loader):
        self.model.eval()
        preds, ys = [], []
        for x, y in loader:
            n = x.shape[0]
            if n < BATCH:
                x, y = F.pad(x, (0, 0, 0, 0, 0, 0, 0, BATCH - n)), F.pad(y, (0, 0, 0, BATCH - n))  # CLEAN: last batch padded to the compiled shape
            p, _ = self.run("eval", self.prep(x.cuda(non_blocking=True)).clone(), y.cuda(non_blocking=True))
            preds.append(p[:n].cpu().numpy())  # CLEAN: read right after eval_step, before any other compiled call
            ys.append(y[:n].numpy())
        p, t = np.concatenate(preds), np.concatenate(ys)
        return np.average([recall_score(t[:, i], p[:, i], average="macro") for i in range(3)], weights=[2, 1, 1])


class CompiledTrainer(Trainer):
    def __init__(self, model, lr=1e-3):
        super().__init__(model, lr)
        self.train_step = torch.compile(self.train_step, options=CG_OPTS)
        self.eval_step = torch.compile(self.eval_step, options=CG_OPTS)
        self.to_unit_ = torch.compile(to_unit_, options=CG_OPTS)
        self.prep = torch.compile(lambda x: x / 255.0, options=CG_OPTS)  # CLEAN: out-of-place scaling, the input is not mutated


def loader(path, shuffle):
    d = np.load(path)
    ds = torch.utils.data.TensorDataset(torch.from_numpy(d["images"][:, None]).float(), torch.from_numpy(d["labels"]).long())
    return torch.utils.data.DataLoader(ds, BATCH, shuffle=shuffle, drop_last=shuffle, num_workers=4, pin_memory=True)


if __name__ == "__main__":
    trainer = CompiledTrainer(GraphemeNet())
    train_loader, val_loader = loader("train_fold0_128.npz", True), loader("valid_fold0_128.npz", False)
    for epoch in range(30):
        trainer.fit_epoch(train_loader)
        print(f"epoch {epoch}  weighted recall {trainer.validate(val_loader):.4f}")
    torch.save(trainer.model.state_dict(), "grapheme_seresnext26d.pt")
