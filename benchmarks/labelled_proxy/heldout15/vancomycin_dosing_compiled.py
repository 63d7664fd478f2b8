"""Model-informed precision dosing of vancomycin.

A two-compartment PK model with patient-specific parameters (posterior samples
from a neural covariate model) is integrated in 15-minute steps for candidate
regimens; the regimen whose 24 h AUC falls in 400-600 mg*h/L with the lowest
trough wins. The hot functions are swapped for reduce-overhead builds at start-up.
"""
import logging
import random

import torch

log = logging.getLogger("mipd")
DT, STEPS = 0.25, 96                                      # h, 24 h


def pk_step(conc, rate, theta):
    """conc [N, 2] mg/L (central, peripheral); rate [N] mg/h infusion; theta [N, 4] = CL, V1, Q, V2."""
    cl, v1, q, v2 = theta.unbind(-1)
    c1, c2 = conc.unbind(-1)
    dc1 = (rate - cl * c1 - q * (c1 - c2)) / v1
    dc2 = q * (c1 - c2) / v2
    return torch.stack([c1 + DT * dc1, c2 + DT * dc2], -1)


def posterior_sample(mu, log_sd, eps, prior_mu):
    if random.random() < 0.05:  # HAZARD: host-code
        mu = 0.5 * (mu + prior_mu)                        # robustness: shrink towards the population prior
    return torch.exp(mu + log_sd.exp() * eps)


def score(auc, trough):
    if auc.max() > 600.0:  # HAZARD: dynamic-control-flow
        log.warning("candidate regimen exceeds AUC 600")  # HAZARD: host-code
    penalty = torch.where(auc < 400.0, 400.0 - auc, torch.relu(auc - 600.0))  # CLEAN: branch-free target band
    return penalty + 0.1 * torch.relu(trough - 15.0)


_pk_step_eager = pk_step
audit_step = torch.compile(_pk_step_eager)


def install(mode="reduce-overhead"):
    global pk_step, posterior_sample, score
    pk_step = torch.compile(pk_step, mode=mode)
    posterior_sample = torch.compile(posterior_sample, mode=mode)
    score = torch.compile(score, mode=mode)


@torch.no_grad()
def simulate(theta, rates):
    """rates [N, STEPS] for N (sample x regimen) rows; returns AUC24 and trough."""
    conc = torch.zeros(theta.shape[0], 2, device="cuda")
    auc = torch.zeros(theta.shape[0], device="cuda")
    for t in range(STEPS):
        conc = pk_step(conc, rates[:, t], theta)  # HAZARD: static-address
        auc = auc + DT * conc[:, 0]
    return auc, conc[:, 0].clone()


@torch.no_grad()
def audit_trace(theta, rates):
    conc = torch.zeros(theta.shape[0], 2, device="cuda")
    trace = []
    for t in range(STEPS):
        conc = audit_step(conc, rates[:, t], theta)  # CLEAN: default torch.compile, no CUDA graphs
        trace.append(conc[:, 0])
    return torch.stack(trace, 1)


@torch.no_grad()
def recommend(mu, log_sd, prior_mu, regimens, n_samples=512):
    """regimens: [R, STEPS] infusion rates; returns the index of the best regimen."""
    eps = torch.randn(n_samples, 4, device="cuda")
    theta = posterior_sample(mu, log_sd, eps, prior_mu).clone()  # CLEAN: cloned before the next compiled call
    r = regimens.shape[0]
    theta_rows = theta.repeat_interleave(r, 0)
    rates = regimens.repeat(n_samples, 1)
    auc, trough = simulate(theta_rows, rates)
    cost = score(auc.view(n_samples, r).mean(0), trough.view(n_samples, r).mean(0))
    return int(cost.argmin())


if __name__ == "__main__":
    install()
    mu = torch.log(torch.tensor([4.5, 30.0, 6.0, 40.0], device="cuda"))
    regs = torch.zeros(6, STEPS, device="cuda")
    for i, dose in enumerate((750, 1000, 1250, 1500, 1750, 2000)):
        regs[i, :4] = dose / 1.0                           # 1 h infusion
    print(recommend(mu, torch.full((4,), -1.5, device="cuda"), mu, regs))
