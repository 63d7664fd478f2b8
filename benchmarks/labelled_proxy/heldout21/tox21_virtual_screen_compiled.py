"""Toxicity triage of a make-on-demand library before ordering: a multitask Tox21 MLP (12 assays)
on Morgan fingerprints flags compounds, and an ESOL-style solubility regressor scores the
survivors. Both models were wrapped with torch.compile(mode="reduce-overhead") after the
profile in ticket CHEM-212 showed the screen was dominated by kernel-launch overhead.
"""
import numpy as np
import torch
import torch.nn as nn
from rdkit import Chem, DataStructs
from rdkit.Chem import AllChem

FP_BITS = 2048
TOX21 = ("NR-AR", "NR-AR-LBD", "NR-AhR", "NR-Aromatase", "NR-ER", "NR-ER-LBD", "NR-PPAR-gamma",
         "SR-ARE", "SR-ATAD5", "SR-HSE", "SR-MMP", "SR-p53")
SOL_BATCH = 512


def morgan(mol, radius=2):
    bv = AllChem.GetMorganFingerprintAsBitVect(mol, radius, nBits=FP_BITS)
    arr = np.zeros((FP_BITS,), dtype=np.float32)
    DataStructs.ConvertToNumpyArray(bv, arr)
    return arr


def pad_rows(x, n):
    return torch.cat([x, x.new_zeros(n - x.shape[0], x.shape[1])]) if x.shape[0] < n else x[:n]


class ToxMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(FP_BITS, 1024), nn.ReLU(), nn.Dropout(0.3),
                                 nn.Linear(1024, 512), nn.ReLU(), nn.Linear(512, len(TOX21)))

    def forward(self, fp):
        return torch.sigmoid(self.net(fp))


class SolubilityMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(FP_BITS, 512), nn.ReLU(), nn.Linear(512, 128), nn.ReLU(), nn.Linear(128, 1))

    def forward(self, fp):
        return self.net(fp)                                  # log10 solubility (mol/L)


@torch.compile(mode="reduce-overhead")
def binarize_(fp):
    return fp.clamp_(0.0, 1.0)  # HAZARD: static-address


class ToxScreen:
    def __init__(self, tox, threshold=0.5):
        self.tox = tox.cuda().eval()
        self.threshold = threshold

    def eager_probs(self, fps):
        with torch.no_grad():
            return self.tox(fps).topk(3, dim=1)  # CLEAN: eager path used by the notebook, no compile

    @torch.compile(mode="reduce-overhead")
    def flag(self, fps):
        p = self.tox(fps)
        return (p > self.threshold).any(1).tolist(), p  # HAZARD: host-sync


class Pipeline:
    def __init__(self, screen, sol_model):
        self.screen = screen
        self.sol = torch.compile(sol_model.cuda().eval(), mode="reduce-overhead")

    @torch.no_grad()
    def run_chunk(self, smiles):
        mols = [(s, m) for s in smiles if (m := Chem.MolFromSmiles(s)) is not None]   # unparsable rows dropped
        fps = torch.from_numpy(np.stack([morgan(m) for _, m in mols])).cuda()
        binarize_(fps)
        flagged, probs = self.screen.flag(fps)  # HAZARD: dynamic-shape
        keep = [i for i, f in enumerate(flagged) if not f][:SOL_BATCH]
        if not keep:
            return []
        idx = torch.tensor(keep, device="cuda")  # CLEAN: built in eager code, outside the compiled functions
        log_s = self.sol(pad_rows(fps.index_select(0, idx), SOL_BATCH))  # CLEAN: padded to one fixed size, a single graph
        worst = probs.index_select(0, idx).max(1).values  # HAZARD: static-address
        rows = zip(keep, log_s[: len(keep), 0].tolist(), worst.tolist())
        return [(mols[i][0], s, w) for i, s, w in rows]


if __name__ == "__main__":
    tox, sol = ToxMLP(), SolubilityMLP()
    tox.load_state_dict(torch.load("tox21_ecfp4_mlp.pt", weights_only=True))
    sol.load_state_dict(torch.load("esol_ecfp4_mlp.pt", weights_only=True))
    pipe = Pipeline(ToxScreen(tox), sol)
    with open("enamine_real_subset.smi") as f, open("order_candidates.tsv", "w") as out:
        chunk = []
        for line in f:
            chunk.append(line.split()[0])
            if len(chunk) == 4096:
                for smi, log_s, worst in pipe.run_chunk(chunk):
                    if log_s > -5.0:
                        out.write(f"{smi}\t{log_s:.2f}\t{worst:.3f}\n")
                chunk = []
