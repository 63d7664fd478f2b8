"""Damped-least-squares IK for a 7-DoF arm: one learned Jacobian correction, captured with capture_begin/end."""
import functools
import torch
import torch.nn as nn

class ArmSpec:
    def __init__(self, link_lengths, payload_kg=0.0):
        self.link_lengths = link_lengths
        self.payload_kg = payload_kg
    @functools.cached_property
    def reach(self):
        return sum(self.link_lengths)  # CLEAN: cached once, link lengths never change
    @property
    def sag_gain(self):
        return 0.002 * self.payload_kg  # HAZARD: python-scalar
    @property
    def dof(self):
        return len(self.link_lengths)  # CLEAN: constant property

class JacobianCorrector(nn.Module):
    def __init__(self, dof):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dof, 128), nn.Tanh(), nn.Linear(128, 3 * dof))
    def forward(self, q):
        return self.net(q).view(q.shape[0], 3, -1)

class KinematicsMixin:
    def fk(self, q):
        ang = torch.cumsum(q, -1)
        xs = (self.lengths * torch.cos(ang)).sum(-1)
        ys = (self.lengths * torch.sin(ang)).sum(-1)
        zs = self.spec.sag_gain * q.sum(-1)
        return torch.stack([xs, ys, zs], -1)
    def analytic_jacobian(self, q):
        ang = torch.cumsum(q, -1)
        jx = -torch.flip(torch.cumsum(torch.flip(self.lengths * torch.sin(ang), [-1]), -1), [-1])
        jy = torch.flip(torch.cumsum(torch.flip(self.lengths * torch.cos(ang), [-1]), -1), [-1])
        return torch.stack([jx, jy, torch.zeros_like(jx)], 1)

class DlsSolver(KinematicsMixin):
    def __init__(self, spec, corrector, lam=0.05):
        self.spec, self.corrector, self.lam = spec, corrector, lam
        self.lengths = torch.tensor(spec.link_lengths, device="cuda")  # CLEAN: uploaded once in __init__
    def step(self, q, target):
        err = (target - self.fk(q)).clamp(-self.spec.reach, self.spec.reach)
        J = self.analytic_jacobian(q) + 0.01 * self.corrector(q)
        return q + self._dls(J, err)
    def _dls(self, J, err):
        manip = (J * J).sum((1, 2))
        dq = (J.transpose(1, 2) @ err.unsqueeze(-1)).squeeze(-1) / (manip + self.lam ** 2).unsqueeze(-1)
        return self._limit(dq, manip)
    def _limit(self, dq, manip):
        if manip.min() < 1e-6:  # HAZARD: dynamic-control-flow
            dq = 0.1 * dq
        return dq.clamp(-0.2, 0.2)

class IkGraphRunner:
    def __init__(self, solver, batch=32, iters=8):
        self.solver, self.iters = solver, iters
        self.q = torch.zeros(batch, solver.spec.dof, device="cuda")
        self.target = torch.zeros(batch, 3, device="cuda")
        self.residual, self.n_solves = None, 0
    def _unrolled(self):
        self.n_solves += 1  # HAZARD: host-code
        q = self.q
        for _ in range(self.iters):
            q = self.solver.step(q, self.target)
        self.q_out = q
        self.residual = (self.target - self.solver.fk(q)).norm(dim=-1)
        self._telemetry(self.residual)
    def _telemetry(self, residual):
        self.last_max_mm = 1e3 * float(residual.max())  # HAZARD: host-sync
    @torch.no_grad()
    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._unrolled()
            self.graph = torch.cuda.CUDAGraph()
            self.graph.capture_begin()  # CLEAN: capture begins on the side stream, after warm-up
            self._unrolled()
            self.graph.capture_end()
        torch.cuda.current_stream().wait_stream(side)
    def solve(self, q0, goal):
        self.q.copy_(q0)  # CLEAN: copy_ into the captured start pose
        self.target.copy_(goal)
        self.graph.replay()
        return self.q_out.clone(), self.residual.clone()
    def retarget(self, goal):
        self.target = goal.to("cuda").contiguous()  # HAZARD: static-address
    def set_payload(self, kg):
        self.solver.spec.payload_kg = kg

def pick_and_place(jobs):
    spec = ArmSpec([0.33, 0.32, 0.28, 0.25, 0.12, 0.08, 0.06])
    runner = IkGraphRunner(DlsSolver(spec, JacobianCorrector(spec.dof).cuda()))
    runner.capture()
    plans = []
    for q0, goal, kg in jobs:
        runner.set_payload(kg)
        plans.append(runner.solve(q0.cuda(), goal.cuda()))
    runner.retarget(jobs[-1][1])
    return plans, runner.solve(jobs[-1][0].cuda(), runner.target)
