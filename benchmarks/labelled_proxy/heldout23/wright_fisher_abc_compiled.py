"""ABC inference of selection strength with a Wright-Fisher simulator.

Population-genetics code.  The simulator is compiled in place with
`global simulate; simulate = torch.compile(simulate, mode="max-autotune")`
and called inside the rejection-ABC loop; summary statistics are compared with
the observed allele-frequency trajectories.
"""
import numpy as np
import torch

dev = torch.device("cuda")
N_E = 10_000
N_GEN = 200
N_LOCI = 4096
SELECTION = 0.0          # set per ABC draw
H_DOM = 0.5
p_obs = torch.from_numpy(np.load("allele_traj_obs.npy")).float().to(dev)   # (N_GEN, N_LOCI)


def summary(traj):
    d = traj[1:] - traj[:-1]
    return torch.stack([traj[-1].mean(), traj[-1].std(), d.abs().mean(), (traj[-1] > 0.95).float().mean()])


def simulate(p0):
    s = SELECTION  # HAZARD: python-scalar
    p = p0
    traj = [p]
    for gen in range(N_GEN):
        w_bar = 1 + s * (p ** 2 + 2 * H_DOM * p * (1 - p))
        p_sel = p * (1 + s * (p + H_DOM * (1 - p))) / w_bar
        drift = torch.randn_like(p) * torch.sqrt(p_sel * (1 - p_sel) / (2 * N_E))  # CLEAN: default-generator CUDA RNG
        p = torch.clamp(p_sel + drift, 0.0, 1.0)  # CLEAN: clamp, no host branch
        if (p == 0).all() or (p == 1).all():  # HAZARD: dynamic-control-flow
            break
        traj.append(p)
    mig = np.random.binomial(10, 0.01)  # HAZARD: host-code
    p_final = traj[-1] * (1 - mig / 100.0)
    traj[-1] = p_final
    return summary(torch.stack(traj))


def abc(n_draws=20_000, eps=0.02, seed=0):
    global SELECTION, simulate
    simulate = torch.compile(simulate, mode="max-autotune")
    rng = np.random.default_rng(seed)
    s_obs = summary(p_obs)
    p0 = p_obs[0].clone()
    accepted, stats_kept = [], []
    for _ in range(n_draws):
        SELECTION = float(rng.uniform(-0.02, 0.05))
        stats = simulate(p0)
        dist = (stats - s_obs).abs().max()
        if dist < eps:
            accepted.append(SELECTION)
            stats_kept.append(stats)  # HAZARD: static-address
    return np.array(accepted), stats_kept


def abc_cloned(draws):
    global SELECTION
    kept = []
    for s in draws:
        SELECTION = s
        kept.append(simulate(p_obs[0]).clone())  # CLEAN: cloned before the next call
    return torch.stack(kept)


if __name__ == "__main__":
    post, st = abc()
    print("posterior mean s", post.mean(), "n accepted", len(post))
    np.save("abc_posterior_s.npy", post)
    ppc = abc_cloned(np.random.default_rng(1).choice(post, 200)).cpu().numpy()
    np.save("abc_ppc_stats.npy", ppc)
