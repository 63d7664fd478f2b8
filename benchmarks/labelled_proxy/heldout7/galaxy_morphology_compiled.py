"""Galaxy Zoo DECaLS morphology: predict volunteer vote fractions per decision-tree
question with a Dirichlet-multinomial loss. The model and the optimizer step are
compiled with CUDA graphs and stored on the trainer.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

# answers per question: smooth/featured, edge-on, bar, spiral, bulge size, merger
QUESTIONS = (2, 2, 3, 2, 3, 4)
N_ANSWERS = sum(QUESTIONS)


class MorphologyNet(nn.Module):
    def __init__(self, debug=False):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 5, stride=2, padding=2), nn.BatchNorm2d(32), nn.SiLU())
        blocks, c = [], 32
        for w in (64, 128, 256, 384):
            blocks += [nn.Conv2d(c, w, 3, stride=2, padding=1), nn.BatchNorm2d(w), nn.SiLU(),
                       nn.Conv2d(w, w, 3, padding=1), nn.BatchNorm2d(w), nn.SiLU()]
            c = w
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(c, N_ANSWERS)
        self.debug = debug

    def forward(self, x):
        h = self.stem(x)
        if self.debug:
            print(f"stem activation std {h.std():.3f}")  # HAZARD: host-code
        h = F.adaptive_avg_pool2d(self.blocks(h), 1).flatten(1)
        return 1.0 + 99.0 * torch.sigmoid(self.head(h))         # Dirichlet concentrations


def dirichlet_multinomial_nll(conc, votes):
    loss, i = 0.0, 0
    for k in QUESTIONS:
        a, v = conc[:, i:i + k], votes[:, i:i + k]
        n = v.sum(1)
        loss = loss - (torch.lgamma(n + 1) + torch.lgamma(a.sum(1)) - torch.lgamma(n + a.sum(1))
                       + (torch.lgamma(v + a) - torch.lgamma(a) - torch.lgamma(v + 1)).sum(1))
        i += k
    return loss.mean()


class ZooTrainer:
    def __init__(self, model, epochs=40, device="cuda"):
        self.model = model.to(device)
        self.device = device
        self.cmodel = torch.compile(self.model, mode="reduce-overhead")
        self.eval_model = torch.compile(self.model)                    # default mode for validation
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.05)
        self.opt_step = torch.compile(self.opt.step, mode="reduce-overhead")
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=epochs)
        self.epochs = epochs

    def fit(self, train_loader, val_loader):
        for epoch in range(self.epochs):
            self.model.train()
            for img, votes in train_loader:
                img, votes = img.to(self.device, non_blocking=True), votes.to(self.device, non_blocking=True)
                loss = dirichlet_multinomial_nll(self.cmodel(img), votes)
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                self.opt_step()
            self.sched.step()  # HAZARD: optimizer
            print(f"epoch {epoch}: val nll {self.validate(val_loader):.4f}")  # CLEAN: print outside any compiled region

    @torch.no_grad()
    def validate(self, loader):
        self.model.eval()
        tot, n = 0.0, 0
        for img, votes in loader:
            conc = self.eval_model(img.to(self.device))  # CLEAN: default torch.compile, no CUDA graphs
            tot += dirichlet_multinomial_nll(conc, votes.to(self.device)).item() * len(img)
            n += len(img)
        return tot / n

    @torch.no_grad()
    def predict_catalogue(self, cutouts):
        """cutouts: list of (3, s, s) tensors, s scaled to 4 Petrosian radii."""
        self.model.eval()
        preds, fixed = [], []
        for cut in cutouts:
            x = cut.to(self.device).unsqueeze(0)
            conc = self.cmodel(x)  # HAZARD: dynamic-shape
            preds.append(conc)  # HAZARD: static-address
            x224 = F.interpolate(x, size=(224, 224), mode="bilinear", antialias=True)
            fixed.append(self.cmodel(x224).clone())  # CLEAN: fixed 224x224 input, output cloned
        return preds, fixed
