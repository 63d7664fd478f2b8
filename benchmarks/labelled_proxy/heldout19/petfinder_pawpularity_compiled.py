"""PetFinder.my - Pawpularity Contest: image + 12 metadata flags -> Pawpularity / 100 with BCE.

5-fold Kaggle training script (timm Swin-T).  The model is compiled with
mode="reduce-overhead" and passed to the train / valid / predict helpers; hflip TTA at the end.
"""
import numpy as np
import pandas as pd
import timm
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image
from sklearn.model_selection import StratifiedKFold

ROOT = "../input/petfinder-pawpularity-score"

class CFG:
    model_name = "swin_tiny_patch4_window7_224"
    img_size, batch_size, epochs, lr, folds = 224, 32, 5, 2e-5, 5
    meta_cols = ["Subject Focus", "Eyes", "Face", "Near", "Action", "Accessory",
                 "Group", "Collage", "Human", "Occlusion", "Info", "Blur"]

class PetDataset(torch.utils.data.Dataset):
    def __init__(self, df, img_dir):
        self.paths = [f"{img_dir}/{i}.jpg" for i in df.Id]
        self.meta = df[CFG.meta_cols].values.astype(np.float32)
        self.y = (df.Pawpularity.values / 100.0).astype(np.float32) if "Pawpularity" in df else np.zeros(len(df), np.float32)
        self.mean, self.std = np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32)

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        img = Image.open(self.paths[i]).convert("RGB").resize((CFG.img_size, CFG.img_size))
        img = (np.asarray(img, dtype=np.float32) / 255.0 - self.mean) / self.std
        return torch.from_numpy(img.transpose(2, 0, 1).copy()), torch.from_numpy(self.meta[i]), torch.tensor(self.y[i])

class PawNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = timm.create_model(CFG.model_name, pretrained=True, num_classes=0)
        self.head = nn.Sequential(nn.Linear(self.backbone.num_features + 12, 128), nn.GELU(), nn.Linear(128, 1))

    def forward(self, img, meta):
        return self.head(torch.cat([self.backbone(img), meta], 1)).squeeze(1)

def _center_meta(meta):
    return meta.mul_(2.0).sub_(1.0)  # HAZARD: static-address

def _rmse(logits, y):
    return torch.sqrt(F.mse_loss(torch.sigmoid(logits) * 100, y * 100)).item()  # HAZARD: host-sync

center_meta = torch.compile(_center_meta, mode="reduce-overhead")
rmse = torch.compile(_rmse, mode="reduce-overhead")

def train_one_epoch(model, loader, opt, sched):
    model.train()
    for img, meta, y in loader:
        img, meta, y = img.cuda(non_blocking=True), meta.cuda(non_blocking=True), y.cuda(non_blocking=True)
        loss = F.binary_cross_entropy_with_logits(model(img, center_meta(meta)), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()  # CLEAN: eager optimizer and scheduler, nothing about the step is compiled or captured

@torch.no_grad()
def valid_one_epoch(model, loader):
    model.eval()
    scores = []
    for img, meta, y in loader:
        logits = model(img.cuda(), center_meta(meta.cuda()))  # HAZARD: dynamic-shape
        scores.append(rmse(logits.clone(), y.cuda()))  # CLEAN: output cloned before it goes to the next compiled function
    return float(np.mean(scores))

@torch.no_grad()
def predict(model, loader):
    model.eval()
    first, second = [], []
    for img, meta, _ in loader:
        n = img.shape[0]
        if n < CFG.batch_size:                                   # pad the last batch to the graph shape
            img = F.pad(img, (0, 0, 0, 0, 0, 0, 0, CFG.batch_size - n))
            meta = F.pad(meta, (0, 0, 0, CFG.batch_size - n))
        img, meta = img.cuda(), center_meta(meta.cuda())
        p1 = model(img, meta).clone()  # CLEAN: cloned before the next call overwrites it
        p2 = model(img.flip(-1), meta)
        first.append(p1[:n])
        second.append(p2[:n])  # HAZARD: static-address
    return torch.sigmoid((torch.cat(first) + torch.cat(second)) / 2) * 100

if __name__ == "__main__":
    df = pd.read_csv(f"{ROOT}/train.csv")
    test = pd.read_csv(f"{ROOT}/test.csv")
    df["bins"] = pd.cut(df.Pawpularity, 10, labels=False)
    kw = dict(batch_size=CFG.batch_size, num_workers=4, pin_memory=True)
    test_loader = torch.utils.data.DataLoader(PetDataset(test, f"{ROOT}/test"), **kw)
    preds = []
    skf = StratifiedKFold(CFG.folds, shuffle=True, random_state=42)
    for fold, (tr, va) in enumerate(skf.split(df, df.bins)):
        tr_loader = torch.utils.data.DataLoader(PetDataset(df.iloc[tr], f"{ROOT}/train"), shuffle=True, drop_last=True, **kw)
        va_loader = torch.utils.data.DataLoader(PetDataset(df.iloc[va], f"{ROOT}/train"), **kw)
        model = torch.compile(PawNet().cuda(), mode="reduce-overhead")
        opt = torch.optim.AdamW(model.parameters(), lr=CFG.lr, weight_decay=1e-6)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=CFG.epochs * len(tr_loader))
        for epoch in range(CFG.epochs):
            train_one_epoch(model, tr_loader, opt, sched)
            print(f"fold {fold} epoch {epoch} valid RMSE {valid_one_epoch(model, va_loader):.3f}")
        preds.append(predict(model, test_loader))
    test["Pawpularity"] = torch.stack(preds).mean(0).cpu().numpy()
    test[["Id", "Pawpularity"]].to_csv("submission.csv", index=False)
