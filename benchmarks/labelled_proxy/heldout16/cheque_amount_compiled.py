"""Cheque amount verification for a bank's mobile-deposit flow.

The courtesy amount (digits box, CAR) is read by a per-column digit classifier;
the legal amount (written words, LAR) by a word-level reader that regresses the
amount in cents. The deposit is auto-accepted only when both agree. Both
readers and the digit decoder are compiled with mode="reduce-overhead".
"""
import time

import torch
import torch.nn as nn

N_COLS, N_SYM = 24, 12          # 0-9, blank, decimal separator
BLANK, SEP = 10, 11


class CourtesyReader(nn.Module):
    def __init__(self):
        super().__init__()
        self.cnn = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d((1, N_COLS)))
        self.cls = nn.Linear(64, N_SYM)

    def forward(self, img):
        logits = self.cls(self.cnn(img).squeeze(2).transpose(1, 2))       # (B, cols, sym)
        conf = logits.softmax(-1).amax(-1).min(-1).values
        if (conf < 0.5).any():  # HAZARD: dynamic-control-flow
            logits = logits / 1.5                                      # soften for the fallback reader
        return logits, conf


class LegalReader(nn.Module):
    def __init__(self, d: int = 128):
        super().__init__()
        self.cnn = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d((1, 64)))
        self.gru = nn.GRU(32, d, batch_first=True, bidirectional=True)
        self.word = nn.Linear(2 * d, 1)
        self.amount = nn.Linear(2 * d, 1)

    def forward(self, img):
        h, _ = self.gru(self.cnn(img).squeeze(2).transpose(1, 2))
        word_mask = torch.sigmoid(self.word(h)).squeeze(-1) > 0.5
        n_words = int(word_mask.sum(1).max())  # HAZARD: host-sync
        pooled = h[:, : max(n_words, 1)].mean(1)
        return torch.relu(self.amount(pooled)).squeeze(-1)       # cents


def decode_cents(logits):
    sym = logits.argmax(-1)                                    # (B, cols)
    is_digit = sym < 10
    after_sep = (sym == SEP).long().cumsum(-1) > 0
    place = torch.where(is_digit & ~after_sep, 1.0, 0.0).flip(-1).cumsum(-1).flip(-1)
    whole = (torch.where(is_digit & ~after_sep, sym, 0) * 10 ** (place - 1).clamp_min(0)).sum(-1)
    stamp = time.time()  # HAZARD: host-code
    return whole * 100, stamp


class DepositVerifier:
    def __init__(self):
        self.car = torch.compile(CourtesyReader().cuda().eval(), mode="reduce-overhead")
        self.lar = torch.compile(LegalReader().cuda().eval(), mode="reduce-overhead")
        self.decode = torch.compile(decode_cents, mode="reduce-overhead")

    @torch.no_grad()
    def verify(self, car_img, lar_img, tol_cents: float = 1.0):
        car_logits, car_conf = self.car(car_img)
        lar_cents = self.lar(lar_img).clone()  # CLEAN: LAR amount cloned before the decoder runs
        car_cents, stamp = self.decode(car_logits)  # HAZARD: static-address
        agree = (car_cents - lar_cents).abs() <= tol_cents
        return agree.cpu(), car_cents.cpu(), stamp

    @torch.no_grad()
    def verify_ordered(self, car_img, lar_img, tol_cents: float = 1.0):
        car_logits, car_conf = self.car(car_img)
        car_cents, stamp = self.decode(car_logits.clone())  # CLEAN: cloned before the next compiled call
        car_cents = car_cents.clone()
        lar_cents = self.lar(lar_img)
        agree = (car_cents - lar_cents).abs() <= tol_cents  # CLEAN: CAR result was cloned before the LAR reader ran
        return agree.cpu(), car_cents.cpu(), stamp


if __name__ == "__main__":
    v = DepositVerifier()
    for _ in range(5):
        car = torch.rand(8, 1, 48, 320, device="cuda")
        lar = torch.rand(8, 1, 64, 1024, device="cuda")
        print(v.verify_ordered(car, lar)[0], v.verify(car, lar)[0])
