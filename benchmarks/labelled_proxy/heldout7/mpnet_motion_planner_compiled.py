"""MPNet-style neural motion planner for a mobile manipulator's base in cluttered aisles.

An obstacle encoder embeds the (padded) point cloud; the planning network proposes
the next waypoint towards the goal; a shortcut smoother post-processes the path.
`Planner` is the eager reference; `CompiledPlanner` compiles its hot methods.
"""
import random

import torch
import torch.nn as nn

MAX_PTS = 2048
FAR = 1e3                                          # padding points placed far outside the map


class ObstacleEncoder(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.point = nn.Sequential(nn.Linear(3, 128), nn.ReLU(), nn.Linear(128, 256), nn.ReLU())
        self.out = nn.Linear(256, d)

    def forward(self, cloud):
        return self.out(self.point(cloud).amax(0))


class PNet(nn.Module):
    def __init__(self, d=64, dof=3):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d + 2 * dof, 256), nn.PReLU(), nn.Dropout(0.1),
                                 nn.Linear(256, 128), nn.PReLU(), nn.Linear(128, dof))

    def forward(self, x):
        return self.net(x)


def pad_cloud(cloud):
    out = torch.full((MAX_PTS, 3), FAR, device=cloud.device)
    n = min(cloud.shape[0], MAX_PTS)
    out[:n] = cloud[:n]
    return out


class Planner:
    def __init__(self, enet, pnet, radius=0.35, goal_bias=0.05, max_steps=60):
        self.enet, self.pnet = enet.eval().cuda(), pnet.eval().cuda()
        self.radius, self.goal_bias, self.max_steps = radius, goal_bias, max_steps
        self.ts = torch.linspace(0, 1, 16, device="cuda")[:, None]

    def encode(self, cloud):
        return self.enet(cloud)

    def step(self, z, cur, goal, cloud):
        if random.random() < self.goal_bias:  # HAZARD: host-code
            cand = goal
        else:
            cand = cur + self.pnet(torch.cat([z, cur, goal], -1))
        seg = cur + self.ts * (cand - cur)
        collides = torch.cdist(seg, cloud).amin(-1) < self.radius
        if collides.any():  # HAZARD: dynamic-control-flow
            cand = cur + 0.5 * (cand - cur)
        return cand

    def smooth(self, path):
        mid = 0.5 * (path[:-2] + path[2:])
        return torch.cat([path[:1], 0.5 * path[1:-1] + 0.5 * mid, path[-1:]])

    @torch.no_grad()
    def plan(self, cloud, start, goal, tol=0.1):
        cloud = pad_cloud(cloud.cuda())  # CLEAN: every query padded to MAX_PTS points
        z = self.encode(cloud).clone()  # CLEAN: encoder output cloned before the step function runs
        cur, goal = start.cuda(), goal.cuda()
        path = [cur]
        for _ in range(self.max_steps):
            nxt = self.step(z, cur, goal, cloud)
            path.append(nxt)  # HAZARD: static-address
            cur = nxt.clone()
            if (cur - goal).norm() < tol:  # CLEAN: eager check in the planning loop, outside the compiled methods
                break
        return self.smooth(torch.stack(path))  # HAZARD: dynamic-shape


class CompiledPlanner(Planner):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.encode = torch.compile(self.encode, mode="reduce-overhead")
        self.step = torch.compile(self.step, mode="reduce-overhead")
        self.smooth = torch.compile(self.smooth, mode="reduce-overhead")


def serve(requests, enet, pnet):
    planner = CompiledPlanner(enet, pnet)
    results = []
    for req in requests:
        traj = planner.plan(req["cloud"], req["start"], req["goal"])
        results.append(traj.cpu())
    return results
