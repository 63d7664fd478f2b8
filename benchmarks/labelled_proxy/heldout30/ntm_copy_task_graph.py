# Neural Turing Machine on the copy task (pytorch-ntm, 2017). To speed up the 50k-sequence run the
# training step for the longest sequence length is captured once and replayed.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class NTM(nn.Module):
    def __init__(self, width=8, ctrl=100, N=128, M=20):
        super().__init__()
        self.N, self.M = N, M
        self.ctrl = nn.LSTMCell(width + 1 + M, ctrl)
        self.read_fc = nn.Linear(ctrl, M + 6)
        self.write_fc = nn.Linear(ctrl, 3 * M + 6)
        self.out = nn.Linear(ctrl + M, width)
        self.register_buffer("mem_bias", torch.randn(N, M) * 1e-3)

    def address(self, mem, k, beta, g, s, gamma, w_prev):
        wc = F.softmax(beta * F.cosine_similarity(mem, k.unsqueeze(1), dim=-1), dim=1)
        wg = g * wc + (1 - g) * w_prev
        ws = torch.cat([wg[:, -1:], wg[:, :-1]], 1) * s[:, :1] + wg * s[:, 1:2] + torch.cat([wg[:, 1:], wg[:, :1]], 1) * s[:, 2:]
        w = ws ** gamma
        return w / (w.sum(1, keepdim=True) + 1e-16)

    def forward(self, x):
        T, B, _ = x.shape
        mem = self.mem_bias.clone().repeat(B, 1, 1)  # CLEAN: memory rebuilt from a registered buffer inside each step, nothing kept across replays
        h = c = x.new_zeros(B, self.ctrl.hidden_size)
        r = x.new_zeros(B, self.M)
        wr = ww = x.new_zeros(B, self.N)
        outs = []
        for t in range(T):
            h, c = self.ctrl(torch.cat([x[t], r], 1), (h, c))  # CLEAN: LSTMCell is capturable
            k, b, g, s, gm = torch.split(self.read_fc(h), [self.M, 1, 1, 3, 1], 1)
            wr = self.address(mem, torch.tanh(k), F.softplus(b), torch.sigmoid(g), F.softmax(s, 1), 1 + F.softplus(gm), wr)
            r = torch.bmm(wr.unsqueeze(1), mem).squeeze(1)
            k, b, g, s, gm, e, a = torch.split(self.write_fc(h), [self.M, 1, 1, 3, 1, self.M, self.M], 1)
            ww = self.address(mem, torch.tanh(k), F.softplus(b), torch.sigmoid(g), F.softmax(s, 1), 1 + F.softplus(gm), ww)
            mem = mem * (1 - ww.unsqueeze(2) * torch.sigmoid(e).unsqueeze(1)) + ww.unsqueeze(2) * a.unsqueeze(1)
            outs.append(self.out(torch.cat([h, r], 1)))
        return torch.stack(outs)


class CopyTaskTrainer:
    def __init__(self, seq_len=20, batch=16, width=8):
        self.seq_len, self.batch, self.width = seq_len, batch, width
        self.net = NTM(width).cuda()
        self.opt = torch.optim.RMSprop(self.net.parameters(), momentum=0.9, alpha=0.95, lr=1e-4)
        self.seq_count, self.costs = 0, []

    def train_step(self):
        seq = np.random.binomial(1, 0.5, (self.seq_len, self.batch, self.width))  # HAZARD: host-code
        seq = torch.from_numpy(seq).float().cuda()  # HAZARD: pinned-memory
        inp = torch.zeros(2 * self.seq_len + 1, self.batch, self.width + 1, device="cuda")
        inp[: self.seq_len, :, : self.width] = seq
        inp[self.seq_len, :, self.width] = 1.0
        self.opt.zero_grad(set_to_none=False)
        y_out = self.net(inp)[self.seq_len + 1:]
        loss = F.binary_cross_entropy_with_logits(y_out, seq)
        loss.backward()
        for p in self.net.parameters():
            p.grad.data.clamp_(-10, 10)  # CLEAN: device-side in-place clamp
        self.opt.step()  # HAZARD: optimizer
        cost = torch.sum(torch.abs((torch.sigmoid(y_out.data) > 0.5).float() - seq))
        self.costs.append(cost.item() / self.batch)  # HAZARD: host-sync
        self.seq_count += self.batch  # HAZARD: host-code
        self.loss = loss

    def capture(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.train_step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.train_step()

    def run(self, num_batches=50000, report=200):
        self.capture()
        for i in range(num_batches):
            self.graph.replay()
            if (i + 1) % report == 0:
                print("batch %d loss %.5f" % (i + 1, self.loss.item()))  # CLEAN: read after replay, outside the capture
