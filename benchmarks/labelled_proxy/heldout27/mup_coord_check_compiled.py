"""muP coordinate check and output-multiplier transfer sweep (Yang et al., Tensor
Programs V) for an MLP, widths 256..4096, compiled with mode="max-autotune"."""
import argparse
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser(description="muP coord check / HP transfer")
parser.add_argument("--widths", type=str, default="256,512,1024,2048,4096")
parser.add_argument("--base_width", type=int, default=256)
parser.add_argument("--output_mults", type=str, default="0.25,0.5,1,2,4")
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--nsteps", type=int, default=4)
parser.add_argument("--batch_size", type=int, default=256)
args = parser.parse_args()

class MuReadout(nn.Linear):
    def __init__(self, in_features, out_features, output_mult=1.0, width_mult=1.0):
        super().__init__(in_features, out_features)
        self.output_mult, self.width_mult = output_mult, width_mult
        nn.init.zeros_(self.weight)

    def forward(self, x):
        mult = self.output_mult / self.width_mult  # HAZARD: python-scalar
        return super().forward(x * mult)

class MLP(nn.Module):
    def __init__(self, width, mup=True, d_in=3072, n_cls=10):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_in, width, bias=False), nn.Linear(width, width, bias=False)
        self.readout = MuReadout(width, n_cls, width_mult=width / args.base_width) if mup else nn.Linear(width, n_cls)
        nn.init.normal_(self.fc2.weight, std=width ** -0.5)

    def forward(self, x):
        return self.readout(F.relu(self.fc2(F.relu(self.fc1(x.flatten(1))))))

def coord_hook(name, records):
    def hook(module, inp, out):
        records.append(dict(module=name, l1=out.abs().mean().item()))  # HAZARD: host-sync
    return hook

def mu_sgd(model, lr, width_mult):
    groups = [{"params": [model.fc1.weight], "lr": lr * width_mult},
              {"params": [model.fc2.weight, model.readout.weight, model.readout.bias], "lr": lr}]
    return torch.optim.SGD(groups, lr=lr)  # CLEAN: per-group LR scaling is plain Python, the optimizer runs eagerly

def coord_check(width, x, y, records, probe_x):
    model = MLP(width).cuda()
    for name in ("fc1", "fc2", "readout"):
        getattr(model, name).register_forward_hook(coord_hook(f"{width}/{name}", records))
    cmodel = torch.compile(model, mode="max-autotune")
    opt = mu_sgd(model, args.lr, width / args.base_width)
    probes = []
    for t in range(args.nsteps):
        F.cross_entropy(cmodel(x), y).backward()
        opt.step()
        opt.zero_grad()
        with torch.no_grad():
            probes.append(cmodel(probe_x))  # HAZARD: static-address
    return probes

def sweep_output_mult(width, x, y, val_x, val_y):
    model = MLP(width).cuda()
    cmodel = torch.compile(model, mode="max-autotune")
    results = {}
    for om in map(float, args.output_mults.split(",")):
        model.readout.output_mult = om
        model.readout.reset_parameters()
        nn.init.zeros_(model.readout.weight)
        opt = mu_sgd(model, args.lr, width / args.base_width)
        for _ in range(100):
            F.cross_entropy(cmodel(x), y).backward()
            opt.step()
            opt.zero_grad()
        with torch.no_grad():
            results[om] = F.cross_entropy(cmodel(val_x), val_y).item()  # CLEAN: read right after the call, nothing ran in between
    return results

def sp_baseline(width, x, y):
    sp = torch.compile(MLP(width, mup=False).cuda(), mode="max-autotune-no-cudagraphs")
    records = []
    sp.readout.register_forward_hook(coord_hook(f"sp{width}/readout", records))  # CLEAN: no-cudagraphs twin of the hook
    sp(x)
    return records

def main(x, y, probe_x, val_x, val_y):
    records = []
    for w in map(int, args.widths.split(",")):
        probes = coord_check(w, x, y, records, probe_x)
        print(w, [p.abs().mean().item() for p in probes])
        print(w, sweep_output_mult(w, x, y, val_x, val_y), sp_baseline(w, x, y))
