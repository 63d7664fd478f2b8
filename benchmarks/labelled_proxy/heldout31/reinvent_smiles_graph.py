"""REINVENT-style de novo design: GRU SMILES prior/agent, RL with augmented likelihood.

Sampling 128 SMILES x 100 tokens dominated each RL step, so the assistant captured the
sampling loop in a CUDA graph (`GraphedSampler`); scoring and the update stay eager.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SmilesRNN(nn.Module):
    def __init__(self, vocab_size, emb=128, hidden=512, layers=3):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, emb)
        self.gru = nn.GRU(emb, hidden, layers, batch_first=True)
        self.out = nn.Linear(hidden, vocab_size)

    def forward(self, tok, h):
        y, h = self.gru(self.emb(tok), h)  # CLEAN: cuDNN GRU is capturable after warm-up
        return self.out(y[:, -1]), h

    def likelihood(self, seqs, bos):
        inp = torch.cat([torch.full_like(seqs[:, :1], bos), seqs[:, :-1]], 1)
        y, _ = self.gru(self.emb(inp))
        logp = F.log_softmax(self.out(y), -1)
        return logp.gather(2, seqs.unsqueeze(-1)).squeeze(-1).sum(1)


class GraphedSampler:
    def __init__(self, agent, vocab, batch=128, max_len=100, seed=1234):
        self.agent, self.vocab = agent, vocab
        self.batch, self.max_len = batch, max_len
        self.bos, self.eos = vocab["^"], vocab["$"]
        self.forbidden_ids = [vocab[t] for t in ("[Si]", "[Se]", "[B-]")]  # med-chem filter
        self.temperature = 1.0
        self.seed, self.n_batches = seed, 0
        self.graph = None

    def anneal(self, step):
        self.temperature = max(0.7, 1.0 - 1e-3 * step)

    @torch.no_grad()
    def _sample(self):
        torch.manual_seed(self.seed + self.n_batches)  # HAZARD: rng
        tok = torch.full((self.batch, 1), self.bos, dtype=torch.long, device="cuda")
        h = torch.zeros(3, self.batch, 512, device="cuda")
        seqs = torch.zeros(self.batch, self.max_len, dtype=torch.long, device="cuda")
        done = torch.zeros(self.batch, dtype=torch.bool, device="cuda")
        temp = self.temperature  # HAZARD: python-scalar
        for t in range(self.max_len):
            logits, h = self.agent(tok, h)
            logits[:, self.forbidden_ids] = float("-inf")  # HAZARD: host-sync
            nxt = torch.multinomial(F.softmax(logits / temp, -1), 1)  # CLEAN: multinomial on the default generator
            nxt = torch.where(done.unsqueeze(1), torch.zeros_like(nxt), nxt)  # CLEAN: where instead of a host branch
            seqs[:, t] = nxt.squeeze(1)
            done |= nxt.squeeze(1) == self.eos
            if done.all():  # HAZARD: dynamic-control-flow
                break
            tok = nxt
        return seqs

    def sample(self):
        if self.graph is None:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2):
                    self._sample()
            torch.cuda.current_stream().wait_stream(s)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.s_seqs = self._sample()
        self.graph.replay()
        self.n_batches += 1
        return self.s_seqs.clone()  # CLEAN: cloned before the next replay


def rl_step(prior, agent, sampler, opt, scoring_fn, itos, sigma=120.0):
    seqs = sampler.sample()
    smiles = ["".join(itos[i] for i in row if i != sampler.eos) for row in seqs.cpu().tolist()]  # CLEAN: host decode after replay
    score = torch.as_tensor(scoring_fn(smiles), device="cuda")  # CLEAN: eager upload outside the graph
    with torch.no_grad():
        prior_ll = prior.likelihood(seqs, sampler.bos)
    agent_ll = agent.likelihood(seqs, sampler.bos)
    loss = ((prior_ll + sigma * score) - agent_ll).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item(), score.mean().item()


def train(prior, agent, vocab, itos, scoring_fn, steps=3000):
    sampler = GraphedSampler(agent, vocab)
    opt = torch.optim.Adam(agent.parameters(), lr=1e-4)  # eager step, outside the graph
    for step in range(steps):
        sampler.anneal(step)
        loss, mean_score = rl_step(prior, agent, sampler, opt, scoring_fn, itos)
        if step % 100 == 0:
            print(f"step {step} loss {loss:.2f} score {mean_score:.3f}")
