# AWD-LSTM word-level LM on Penn Treebank (salesforce/awd-lstm-lm, 2017, torch 0.4). Migrated to 2.x:
# the model and the SGD step are compiled with mode="reduce-overhead"; the BPTT loop is the original.
import argparse
import math
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--bptt", type=int, default=70)
parser.add_argument("--lr", type=float, default=30.0)
parser.add_argument("--clip", type=float, default=0.25)
parser.add_argument("--alpha", type=float, default=2.0)
parser.add_argument("--seed", type=int, default=141)
args = parser.parse_args([])
torch.cuda.manual_seed(args.seed)  # CLEAN: seeded at start-up, outside the compiled code


class RNNModel(nn.Module):
    def __init__(self, ntoken=10000, ninp=400, nhid=1150, nlayers=3, dropouti=0.65, dropouth=0.3):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnns = nn.ModuleList([nn.LSTM(ninp if l == 0 else nhid, nhid if l != nlayers - 1 else ninp) for l in range(nlayers)])
        self.decoder = nn.Linear(ninp, ntoken)
        self.decoder.weight = self.encoder.weight
        self.dropouti, self.dropouth = dropouti, dropouth

    def forward(self, inp, hidden):
        emb = F.dropout(self.encoder(inp), self.dropouti, self.training)
        print("bptt batch", tuple(inp.shape))  # HAZARD: host-code
        raw_output, new_hidden = emb, []
        for l, rnn in enumerate(self.rnns):
            raw_output, new_h = rnn(raw_output, hidden[l])
            new_hidden.append(new_h)
            if l != len(self.rnns) - 1:
                raw_output = F.dropout(raw_output, self.dropouth, self.training)
        return self.decoder(raw_output), new_hidden, raw_output


def repackage_hidden(h):
    return tuple(repackage_hidden(v) for v in h) if isinstance(h, (tuple, list)) else h.detach().clone()


model = RNNModel().cuda()
cmodel = torch.compile(model, mode="reduce-overhead")
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, weight_decay=1.2e-6)
opt_step = torch.compile(optimizer.step, mode="reduce-overhead")


def train(train_data, batch_size=80):
    model.train()
    hidden = [(torch.zeros(1, batch_size, r.hidden_size, device="cuda"),) * 2 for r in model.rnns]
    total_loss, i = 0.0, 0
    while i < train_data.size(0) - 2:
        bptt = args.bptt if np.random.random() < 0.95 else args.bptt / 2.0
        seq_len = max(5, int(np.random.normal(bptt, 5)))
        lr2 = optimizer.param_groups[0]["lr"]
        optimizer.param_groups[0]["lr"] = lr2 * seq_len / args.bptt  # HAZARD: optimizer
        data, targets = train_data[i:i + seq_len], train_data[i + 1:i + 1 + seq_len].reshape(-1)
        hidden = repackage_hidden(hidden)  # CLEAN: detached clones fed back, not the graph-owned outputs
        output, hidden, last = cmodel(data, hidden)  # HAZARD: dynamic-shape
        raw_loss = F.cross_entropy(output.view(-1, output.size(-1)), targets)
        loss = raw_loss + args.alpha * last.pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)  # CLEAN: eager clip between the compiled calls
        opt_step()
        optimizer.param_groups[0]["lr"] = lr2
        total_loss += raw_loss.detach()
        i += seq_len
    return math.exp(total_loss.item() / max(i // args.bptt, 1))  # CLEAN: eager host read after the loop


@torch.no_grad()
def evaluate(data_source, batch_size=10):
    model.eval()
    hidden = [(torch.zeros(1, batch_size, r.hidden_size, device="cuda"),) * 2 for r in model.rnns]
    outputs = []
    for i in range(0, data_source.size(0) - 1 - args.bptt, args.bptt):
        data = data_source[i:i + args.bptt]
        output, hidden, _ = cmodel(data, hidden)
        hidden = repackage_hidden(hidden)
        outputs.append(output)  # HAZARD: static-address
    return outputs
