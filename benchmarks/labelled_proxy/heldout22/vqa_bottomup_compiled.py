"""Bottom-up top-down VQA (36 Faster R-CNN region features + GRU question encoder) picked from a model zoo
and served with torch.compile(backend="cudagraphs"); a default-mode compile is used for nightly eval."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence

class QuestionEncoder(nn.Module):
    def __init__(self, vocab=20000, emb=300, hidden=1024):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb, padding_idx=0)
        self.gru = nn.GRU(emb, hidden, batch_first=True)

    def forward(self, q, lengths):
        if (lengths == 0).any():  # HAZARD: dynamic-control-flow
            lengths = lengths.clamp_min(1)
        packed = pack_padded_sequence(self.emb(q), lengths.cpu(), batch_first=True, enforce_sorted=False)  # HAZARD: host-sync
        _, h = self.gru(packed)
        return h[-1]

class TopDownAttention(nn.Module):
    def __init__(self, v_dim, q_dim, hidden=1024):
        super().__init__()
        self.v_proj, self.q_proj = nn.Linear(v_dim, hidden), nn.Linear(q_dim, hidden)
        self.score = nn.Linear(hidden, 1)

    def forward(self, v, q):
        return self.score(F.relu(self.v_proj(v)) * F.relu(self.q_proj(q))[:, None]).softmax(1)

class BUTD(nn.Module):
    def __init__(self, n_answers=3129, v_dim=2048, hidden=1024):
        super().__init__()
        self.q_enc = QuestionEncoder(hidden=hidden)
        self.att = TopDownAttention(v_dim, hidden, hidden)
        self.q_net, self.v_net = nn.Linear(hidden, hidden), nn.Linear(v_dim, hidden)
        self.classifier = nn.Sequential(nn.Linear(hidden, 2 * hidden), nn.ReLU(), nn.Linear(2 * hidden, n_answers))

    def forward(self, v, q, lengths):
        q_emb = self.q_enc(q, lengths)
        v_emb = (self.att(v, q_emb) * v).sum(1)
        return self.classifier(F.relu(self.q_net(q_emb)) * F.relu(self.v_net(v_emb)))

ZOO = {"butd-vqa2": lambda: BUTD(n_answers=3129), "butd-gqa": lambda: BUTD(n_answers=1842)}

def tokenize_batch(questions, vocab, pad_to=None):
    ids = [[vocab.get(w, 1) for w in q.lower().rstrip("?").split()][:14] for q in questions]
    width = pad_to or max(len(t) for t in ids)
    q = torch.zeros(len(ids), width, dtype=torch.long)
    for i, t in enumerate(ids):
        q[i, : len(t)] = torch.tensor(t, dtype=torch.long)
    return q.cuda(), torch.tensor([len(t) for t in ids]).cuda()

class VQAServer:
    def __init__(self, name, vocab, answers):
        self.model = model = ZOO[name]().cuda().eval()
        self.vocab, self.answers = vocab, answers
        self.answer = torch.compile(model, backend="cudagraphs")
        self.attend = torch.compile(model.att, backend="cudagraphs")
        self.nightly = torch.compile(model)

    @torch.no_grad()
    def ask(self, v, questions):
        q, lengths = tokenize_batch(questions, self.vocab)
        logits = self.answer(v, q, lengths)  # HAZARD: dynamic-shape
        return [self.answers[i] for i in logits.argmax(-1).tolist()]

    @torch.no_grad()
    def ask_padded(self, v, questions):
        q, lengths = tokenize_batch(questions, self.vocab, pad_to=14)
        logits = self.answer(v, q, lengths)  # CLEAN: questions padded to 14 tokens, fixed shape
        return [self.answers[i] for i in logits.argmax(-1).tolist()]  # CLEAN: read right after its own call

    @torch.no_grad()
    def explain(self, v, questions):
        q, lengths = tokenize_batch(questions, self.vocab, pad_to=14)
        att = self.attend(v, self.model.q_enc(q, lengths))
        logits = self.answer(v, q, lengths)
        return logits.argmax(-1).tolist(), att.squeeze(-1).topk(3, dim=-1).indices.tolist()  # HAZARD: static-address

    @torch.no_grad()
    def nightly_accuracy(self, v, q, lengths, gt):
        return (self.nightly(v, q, lengths).argmax(-1) == gt).float().mean().item()  # CLEAN: default-mode compile

if __name__ == "__main__":
    vocab = {w: i + 2 for i, w in enumerate("what color is the how many are there on table".split())}
    server = VQAServer("butd-vqa2", vocab, [f"ans{i}" for i in range(3129)])
    v = torch.randn(2, 36, 2048, device="cuda")
    print(server.ask(v, ["What color is the table?", "How many are there?"]))
    print(server.ask_padded(v, ["What color is the table?", "How many?"]))
    print(server.explain(v, ["What is on the table?", "How many are there?"]))
