"""NeuroSAT (Selsam et al.) message passing on padded CNF batches, served behind a small
`CUDAGraphed` wrapper that an AI assistant wrote for us ("replay the solver as a CUDA
graph, inputs always have the same padded shape").
"""
import torch
import torch.nn as nn

N_VARS, N_CLAUSES, D = 40, 200, 128


class CUDAGraphed:
    """Wrap a module so repeated calls replay one CUDA graph (inputs must keep their shape)."""

    def __init__(self, module):
        self.module = module
        self.graph = None

    def __call__(self, *args):
        if self.graph is None:
            self.static_in = [a.clone() for a in args]
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):  # HAZARD: api-misuse
                self.static_out = self.module(*self.static_in)
        for s, a in zip(self.static_in, args):
            s.copy_(a)  # CLEAN: new inputs copied into the captured buffers
        self.graph.replay()
        return self.static_out.clone()  # CLEAN: the caller gets a copy that survives the next replay


def mlp(d_in, d_out):
    return nn.Sequential(nn.Linear(d_in, D), nn.ReLU(), nn.Linear(D, D), nn.ReLU(), nn.Linear(D, d_out))


class NeuroSAT(nn.Module):
    def __init__(self, rounds=16):
        super().__init__()
        self.rounds = rounds
        self.L_init = nn.Parameter(torch.randn(1, 1, D) / D ** 0.5)
        self.C_init = nn.Parameter(torch.randn(1, 1, D) / D ** 0.5)
        self.L_msg, self.C_msg = mlp(D, D), mlp(D, D)
        self.L_update = nn.LSTMCell(2 * D, D)
        self.C_update = nn.LSTMCell(D, D)
        self.L_vote = mlp(D, 1)

    def forward(self, adj, lit_mask, clause_mask):
        # adj (B, 2n, m): literal-in-clause incidence; literal i and i + n are negations
        B = adj.shape[0]
        n_lits = int(lit_mask.sum(1).max())  # HAZARD: host-sync
        L = self.L_init.expand(B, 2 * N_VARS, D).reshape(-1, D)
        C = self.C_init.expand(B, N_CLAUSES, D).reshape(-1, D)
        Lc, Cc = torch.zeros_like(L), torch.zeros_like(C)
        for _ in range(self.rounds):  # HAZARD: python-scalar
            c_in = torch.bmm(adj.transpose(1, 2), self.L_msg(L).view(B, -1, D)).reshape(-1, D)
            C, Cc = self.C_update(c_in, (C, Cc))
            l_msg = torch.bmm(adj, self.C_msg(C).view(B, -1, D))
            flipped = torch.roll(L.view(B, -1, D), shifts=N_VARS, dims=1)  # CLEAN: fixed shift by the padded variable count
            L, Lc = self.L_update(torch.cat([l_msg, flipped], -1).reshape(-1, 2 * D), (L, Lc))
            # stop early once the literal votes already decode to a satisfying assignment
            lit_true = (self.L_vote(L).view(B, -1)[:, :N_VARS] > 0).float()
            val = torch.cat([lit_true, 1 - lit_true], 1) * lit_mask
            sat = (torch.bmm(val[:, None], adj)[:, 0] > 0) | ~clause_mask
            if sat.all():  # HAZARD: dynamic-control-flow
                break
        votes = self.L_vote(L).view(B, -1)[:, :n_lits] * lit_mask[:, :n_lits]
        return votes.sum(1) / lit_mask.sum(1)


@torch.no_grad()
def solve_file(path, model, fast):
    adj, lit_mask, clause_mask, n_vars = load_padded_cnf(path, N_VARS, N_CLAUSES)
    model.rounds = 26 if max(n_vars) > 20 else 16          # bigger problems need more rounds
    logit = fast(adj.cuda(), lit_mask.cuda(), clause_mask.cuda())
    return torch.sigmoid(logit).cpu()


def load_padded_cnf(path, n_max, m_max):
    import pickle
    with open(path, "rb") as f:
        problems = pickle.load(f)                          # 512 (n_vars, clauses) per shard
    adj = torch.zeros(len(problems), 2 * n_max, m_max)
    lit_mask = torch.zeros(len(problems), 2 * n_max)
    clause_mask = torch.zeros(len(problems), m_max, dtype=torch.bool)
    for b, (n, clauses) in enumerate(problems):
        lit_mask[b, :n] = lit_mask[b, n_max:n_max + n] = 1
        clause_mask[b, :len(clauses)] = True
        for c, clause in enumerate(clauses):
            for lit in clause:
                adj[b, abs(lit) - 1 + (n_max if lit < 0 else 0), c] = 1
    return adj, lit_mask, clause_mask, [n for n, _ in problems]


if __name__ == "__main__":
    model = NeuroSAT().cuda().eval()
    model.load_state_dict(torch.load("neurosat_sr40.pt", weights_only=True))
    fast = CUDAGraphed(model)
    for shard in ("sr10_40_test_0.pkl", "sr10_40_test_1.pkl", "sr40_test.pkl"):
        p = solve_file(shard, model, fast)
        print(shard, f"predicted SAT fraction {(p > 0.5).float().mean().item():.3f}")
