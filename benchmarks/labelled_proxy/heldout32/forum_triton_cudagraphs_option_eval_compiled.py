# Forum: "Is options={'triton.cudagraphs': True} the same as
# mode='reduce-overhead'? My eval harness gets different feature norms with it,
# and the threshold sweep recompiles every time." Backbone, head and the
# post-processing are compiled separately; everything runs under no_grad.
import torch
import torch.nn as nn

THRESH = 0.5
CG = {"triton.cudagraphs": True}

backbone = nn.Sequential(nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(),
                         nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten()).cuda().eval()
head = nn.Linear(64, 20).cuda().eval()

cb = torch.compile(backbone, options=CG)
ch = torch.compile(head, options=CG)
cb_audit = torch.compile(backbone, options={"triton.cudagraphs": False})  # CLEAN: audit build without CUDA graphs


@torch.compile(options=CG)
def postprocess(probs):
    thr = THRESH  # HAZARD: python-scalar
    picked = probs[probs > thr]  # HAZARD: dynamic-shape
    return picked.cpu().tolist()  # HAZARD: host-sync


@torch.compile(options=CG)
def postprocess_dense(probs, thr):
    return torch.where(probs > thr, probs, torch.zeros_like(probs))  # CLEAN: fixed shape, threshold as a tensor


x = torch.randn(128, 3, 64, 64, device="cuda")
with torch.no_grad():
    for t in (0.3, 0.5, 0.7):
        THRESH = t
        feats = cb(x)
        probs = torch.sigmoid(ch(feats.clone()))  # CLEAN: cloned hand-over to the next compiled module
        kept = postprocess(probs)
        dense = postprocess_dense(probs, torch.tensor(t, device="cuda"))
        norms = feats.norm(dim=1)  # HAZARD: static-address
        print(t, len(kept), dense.count_nonzero().item(), norms.mean().item())

    feats_a = cb_audit(x)
    probs_a = torch.sigmoid(ch(feats_a))
    print("audit norms", feats_a.norm(dim=1).mean().item())  # CLEAN: no-cudagraphs build, its output is not pool-owned
