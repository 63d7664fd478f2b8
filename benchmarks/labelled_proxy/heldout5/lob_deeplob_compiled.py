"""DeepLOB mid-price direction classifier on 10-level limit-order-book snapshots.

The reduce-overhead compiled model and a compiled normaliser are handed to a trainer object.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class DeepLOB(nn.Module):
    def __init__(self, levels=10, n_cls=3):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, 32, (1, 2), stride=(1, 2)), nn.LeakyReLU(0.01),
            nn.Conv2d(32, 32, (4, 1), padding=(2, 0)), nn.LeakyReLU(0.01),
            nn.Conv2d(32, 32, (1, 2), stride=(1, 2)), nn.LeakyReLU(0.01),
            nn.Conv2d(32, 32, (1, levels)), nn.LeakyReLU(0.01))
        self.inception = nn.ModuleList(nn.Conv2d(32, 64, (k, 1), padding=(k // 2, 0)) for k in (1, 3, 5))
        self.lstm = nn.LSTM(192, 64, batch_first=True)
        self.fc = nn.Linear(64, n_cls)

    def forward(self, x):  # (B, T, 40): ask/bid price and size per level, z-scored
        x = x.clamp(-10.0, 10.0)  # CLEAN: out-of-place clamp of the input
        if x.abs().amax() > 8.0:  # HAZARD: dynamic-control-flow
            x = torch.tanh(x / 8.0) * 8.0
        h = self.conv(x[:, None])
        T = h.shape[2]
        h = torch.cat([conv(h)[:, :, :T] for conv in self.inception], 1)
        out, _ = self.lstm(h.squeeze(-1).transpose(1, 2))
        return self.fc(out[:, -1])


def zscore_(x, mu, sd):
    return x.sub_(mu).div_(sd)  # HAZARD: static-address


class LOBTrainer:
    def __init__(self, model, prep, opt, mu, sd):
        self.model, self.prep, self.opt = model, prep, opt
        self.mu, self.sd = mu, sd
        self.raw_logits, self.probs = [], []

    def train_epoch(self, loader):
        for x, y in loader:  # (256, 100, 40) windows, drop_last=True
            x = self.prep(x.cuda(non_blocking=True), self.mu, self.sd)
            loss = F.cross_entropy(self.model(x), y.cuda(non_blocking=True), label_smoothing=0.1)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
        return loss.item()

    @torch.no_grad()
    def evaluate(self, loader):
        for x, _ in loader:
            logits = self.model(self.prep(x.cuda(), self.mu, self.sd))
            self.raw_logits.append(logits)  # HAZARD: static-address
            self.probs.append(logits.softmax(-1))  # CLEAN: softmax outside the compiled model makes a fresh tensor
        return torch.cat(self.probs)

    @torch.no_grad()
    def replay_session(self, book, max_window=100):
        preds = []
        for t in range(10, book.shape[0]):
            window = ((book[max(0, t - max_window):t] - self.mu) / self.sd)[None]
            preds.append(self.model(window).argmax(-1).clone())  # HAZARD: dynamic-shape
        return torch.cat(preds)


def main(train_loader, test_loader, book, mu, sd, epochs=50):
    net, book = DeepLOB().cuda(), book.cuda()
    model = torch.compile(net, mode="reduce-overhead")
    prep = torch.compile(zscore_, mode="reduce-overhead")
    trainer = LOBTrainer(model, prep, torch.optim.Adam(net.parameters(), lr=1e-4, eps=1.0), mu.cuda(), sd.cuda())
    for epoch in range(epochs):
        print(f"epoch {epoch}: loss {trainer.train_epoch(train_loader):.4f}")
    probs = trainer.evaluate(test_loader)
    scan = torch.compile(net)
    with torch.no_grad():
        for w in (50, 100, 200):
            print(w, scan(((book[:w] - mu.cuda()) / sd.cuda())[None]).softmax(-1))  # CLEAN: varying window lengths under default torch.compile
    return probs, trainer.replay_session(book)
