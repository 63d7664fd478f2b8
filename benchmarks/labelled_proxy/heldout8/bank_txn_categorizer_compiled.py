"""Spending categories for a retail banking app.

Card transactions are categorised (groceries, dining, transport, rent, ...)
from the raw merchant descriptor, the MCC and the amount in EUR.  Push
notifications score single transactions padded to a small batch; monthly
statements are scored in one go.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

CG = {"triton.cudagraphs": True}
NO_CG = {"triton.cudagraphs": False}
CATEGORIES = ["groceries", "dining", "transport", "rent", "utilities", "shopping", "travel",
              "health", "entertainment", "transfers", "income", "fees", "other"]
DESC_LEN, N_MCC, PUSH_BATCH = 64, 1000, 32


class MerchantNet(nn.Module):
    def __init__(self, d=192):
        super().__init__()
        self.chars = nn.Embedding(256, 48)
        self.conv = nn.Sequential(nn.Conv1d(48, d, 5, padding=2), nn.ReLU(), nn.Conv1d(d, d, 5, padding=2), nn.ReLU())
        self.mcc = nn.Embedding(N_MCC, 32)
        self.head = nn.Sequential(nn.Linear(d + 32 + 1, 256), nn.ReLU(), nn.Linear(256, len(CATEGORIES)))

    def forward(self, desc, mcc, log_amt):
        h = self.conv(self.chars(desc).transpose(1, 2)).amax(-1)
        return self.head(torch.cat([h, self.mcc(mcc), log_amt.unsqueeze(-1)], -1))


class Categorizer:
    def __init__(self, model):
        self.model = model.cuda().eval()
        self.fx_to_eur = 1.0                        # account currency -> EUR, pushed by the FX service
        self.classify = torch.compile(self._classify, options=CG)
        self.explain = torch.compile(self._explain, options=NO_CG)
        self.statement_probs = []

    def on_fx_update(self, rate):
        self.fx_to_eur = rate

    def _classify(self, desc, mcc, amount):
        amt_eur = amount * self.fx_to_eur  # HAZARD: python-scalar
        probs = self.model(desc, mcc, torch.log1p(amt_eur.abs())).softmax(-1)
        print("categorised", desc.shape[0], "transactions")  # HAZARD: host-code
        return probs

    def _explain(self, desc, mcc, amount):
        probs = self.model(desc, mcc, torch.log1p(amount.abs())).softmax(-1)
        return probs.topk(3, -1).indices.tolist()  # CLEAN: compiled with triton.cudagraphs off

    @torch.inference_mode()
    def monthly_statement(self, txns):
        probs = self.classify(txns["desc"], txns["mcc"], txns["amount"])  # HAZARD: dynamic-shape
        self.statement_probs.append(probs)  # HAZARD: static-address
        return [CATEGORIES[i] for i in probs.argmax(-1).tolist()]

    @torch.inference_mode()
    def push_notification(self, desc, mcc, amount):
        n = desc.shape[0]
        pad = PUSH_BATCH - n
        probs = self.classify(F.pad(desc, (0, 0, 0, pad)), F.pad(mcc, (0, pad)), F.pad(amount, (0, pad)))  # CLEAN: padded to PUSH_BATCH rows
        top = probs[:n].argmax(-1).clone()  # CLEAN: read and copied before the next compiled call
        return [CATEGORIES[i] for i in top.tolist()]


def encode_desc(strings):
    out = torch.zeros(len(strings), DESC_LEN, dtype=torch.long)
    for i, s in enumerate(strings):
        b = list(s.upper().encode()[:DESC_LEN])
        out[i, : len(b)] = torch.tensor(b)
    return out.cuda()


if __name__ == "__main__":
    cat = Categorizer(MerchantNet())
    desc = encode_desc(["TESCO STORES 3281", "UBER *TRIP", "NETFLIX.COM"])
    mcc = torch.tensor([541, 412, 784], device="cuda")
    amt = torch.tensor([-23.4, -11.9, -12.99], device="cuda")
    print(cat.push_notification(desc, mcc, amt), cat.explain(desc, mcc, amt))
    cat.on_fx_update(0.92)
    for n in (143, 88, 201):
        txns = {"desc": torch.randint(32, 127, (n, DESC_LEN), device="cuda"),
                "mcc": torch.randint(0, N_MCC, (n,), device="cuda"), "amount": torch.randn(n, device="cuda") * 50}
        cat.monthly_statement(txns)
