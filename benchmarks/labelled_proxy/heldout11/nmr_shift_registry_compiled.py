"""13C chemical-shift prediction for a structure-elucidation service.

Molecules arrive as padded atom-feature / adjacency tensors; a message-passing network predicts
per-atom shifts (ppm). Pipeline stages are registered by name and compiled with the
`cudagraphs` backend at start-up; the QA notebook uses the same stages compiled by default.
"""
import torch
import torch.nn as nn

MAX_ATOMS, N_FEAT = 64, 32
STAGES, COMPILED = {}, {}


def register(name):
    def deco(fn):
        STAGES[name] = fn
        return fn
    return deco


def compile_all(**kw):
    for name, fn in STAGES.items():
        COMPILED[name] = torch.compile(fn, **kw)


class ShiftMPNN(nn.Module):
    def __init__(self, hid=128, steps=4):
        super().__init__()
        self.embed = nn.Linear(N_FEAT, hid)
        self.msg = nn.ModuleList(nn.Linear(hid, hid) for _ in range(steps))
        self.upd = nn.ModuleList(nn.GRUCell(hid, hid) for _ in range(steps))
        self.out = nn.Sequential(nn.Linear(hid, hid), nn.SiLU(), nn.Linear(hid, 1))

    def forward(self, x, adj):
        h = self.embed(x)
        b, n, d = h.shape
        for msg, upd in zip(self.msg, self.upd):
            m = adj @ msg(h)
            h = upd(m.reshape(b * n, d), h.reshape(b * n, d)).view(b, n, d)
        return self.out(h).squeeze(-1)


@register("standardize")
def standardize_(x, mean, std):
    return x.sub_(mean).div_(std)  # HAZARD: static-address


@register("predict")
def predict(model, x, adj, atom_mask, solvent_offset):
    shifts = model(x, adj) * 50.0 + 100.0
    shifts = shifts + solvent_offset  # HAZARD: python-scalar
    return torch.where(atom_mask, shifts, torch.zeros_like(shifts))  # CLEAN: padded atoms masked with torch.where


@register("report")
def report(shifts, atom_mask, carbon):
    keep = atom_mask & carbon
    return sorted(shifts[0][keep[0]].tolist())  # HAZARD: host-sync


def pad(x, adj, n):
    xp = torch.zeros(1, MAX_ATOMS, N_FEAT, device="cuda")
    ap = torch.zeros(1, MAX_ATOMS, MAX_ATOMS, device="cuda")
    xp[:, :n], ap[:, :n, :n] = x, adj
    mask = torch.arange(MAX_ATOMS, device="cuda")[None] < n
    return xp, ap, mask


@torch.no_grad()
def elucidate(model, molecules, stats, solvent="CDCl3"):
    offset = {"CDCl3": 0.0, "DMSO-d6": -0.4, "CD3OD": 0.9}[solvent]
    out = []
    for x, adj, carbon in molecules:
        n = x.shape[1]
        xp, ap, mask = pad(x, adj, n)  # CLEAN: padded to MAX_ATOMS, one shape for every molecule
        xp = COMPILED["standardize"](xp, *stats)
        shifts = COMPILED["predict"](model, xp, ap, mask, offset).clone()  # CLEAN: output cloned before it goes to the next compiled stage
        out.append(COMPILED["report"](shifts, mask, pad(carbon[..., None].float(), adj, n)[0][..., 0] > 0))
    return out


@torch.no_grad()
def quick_check(model, x, adj, stats):
    mask = torch.ones(x.shape[:2], dtype=torch.bool, device="cuda")
    return COMPILED["predict"](model, x, adj, mask, 0.0)  # HAZARD: dynamic-shape


def qa_notebook(model, x, adj):
    raw = torch.compile(STAGES["predict"])  # CLEAN: default torch.compile, no CUDA graphs
    return raw(model, x, adj, torch.ones(x.shape[:2], dtype=torch.bool, device="cuda"), 0.0).cpu()


if __name__ == "__main__":
    model = ShiftMPNN().cuda().eval()
    compile_all(backend="cudagraphs")
    stats = (torch.zeros(N_FEAT, device="cuda"), torch.ones(N_FEAT, device="cuda"))
    mols = [(torch.randn(1, n, N_FEAT, device="cuda"), torch.rand(1, n, n, device="cuda").round(),
             torch.rand(1, n, device="cuda") > 0.5) for n in (12, 23, 31, 18)]
    print(elucidate(model, mols, stats, solvent="DMSO-d6"))
    for x, adj, _ in mols:
        quick_check(model, x, adj, stats)
