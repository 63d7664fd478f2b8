"""AlphaZero-style chess self-play.

Self-play leaf evaluation replays CUDA graphs captured with CUDAGraph.capture_begin /
capture_end (one per leaf-batch bucket); the learner is torch.compile(mode="reduce-overhead").

    python chess_selfplay_graph.py --games 200 --sims 400 --train-every 10
"""
import argparse
import collections
import logging
import math
import os
import pickle
import random
import time
from dataclasses import dataclass

import chess
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("az")

POLICY_SIZE = 64 * 73
PLANES = 19


@dataclass
class AZConfig:
    blocks: int = 10
    filters: int = 128
    sims: int = 400
    leaf_batch: int = 32
    buckets: tuple = (1, 8, 32)
    c_puct: float = 1.5
    dirichlet_alpha: float = 0.3
    noise_frac: float = 0.25
    temp_moves: int = 30
    batch: int = 512
    lr: float = 0.02
    buffer_size: int = 200_000
    ckpt: str = "az.pt"


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--games", type=int, default=200)
    p.add_argument("--sims", type=int, default=400)
    p.add_argument("--train-every", type=int, default=10)
    p.add_argument("--train-steps", type=int, default=200)
    p.add_argument("--resume", default=None)
    return p.parse_args()


# ----------------------------------------------------------------------------- encoding (host)

def encode_board(board: chess.Board) -> np.ndarray:
    planes = np.zeros((PLANES, 8, 8), dtype=np.float32)
    for sq, piece in board.piece_map().items():
        idx = (piece.piece_type - 1) + (0 if piece.color == board.turn else 6)
        planes[idx, sq // 8, sq % 8] = 1.0
    planes[12].fill(float(board.turn))
    planes[13].fill(board.fullmove_number / 200.0)
    planes[14].fill(float(board.has_kingside_castling_rights(board.turn)))
    planes[15].fill(float(board.has_queenside_castling_rights(board.turn)))
    planes[16].fill(float(board.has_kingside_castling_rights(not board.turn)))
    planes[17].fill(float(board.has_queenside_castling_rights(not board.turn)))
    planes[18].fill(board.halfmove_clock / 100.0)
    return planes


def move_index(move: chess.Move) -> int:
    dx = chess.square_file(move.to_square) - chess.square_file(move.from_square)
    dy = chess.square_rank(move.to_square) - chess.square_rank(move.from_square)
    if move.promotion and move.promotion != chess.QUEEN:
        plane = 64 + (move.promotion - 2) * 3 + (dx + 1)
    elif (abs(dx), abs(dy)) in ((1, 2), (2, 1)):
        plane = 56 + [(1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1), (-2, 1), (-1, 2)].index((dx, dy))
    else:
        dist = max(abs(dx), abs(dy))
        direction = [(0, 1), (1, 1), (1, 0), (1, -1), (0, -1), (-1, -1), (-1, 0), (-1, 1)].index(
            (int(math.copysign(1, dx)) if dx else 0, int(math.copysign(1, dy)) if dy else 0))
        plane = direction * 7 + dist - 1
    return move.from_square * 73 + plane


def legal_mask(board: chess.Board) -> np.ndarray:
    m = np.zeros(POLICY_SIZE, dtype=np.bool_)
    for mv in board.legal_moves:
        m[move_index(mv)] = True
    return m


# ----------------------------------------------------------------------------- network

class SEBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(c)
        self.c2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(c)
        self.se = nn.Sequential(nn.Linear(c, c // 4), nn.ReLU(), nn.Linear(c // 4, 2 * c))

    def forward(self, x):
        h = F.relu(self.b1(self.c1(x)))
        h = self.b2(self.c2(h))
        w, b = self.se(h.mean((2, 3))).chunk(2, -1)
        return F.relu(x + h * torch.sigmoid(w)[..., None, None] + b[..., None, None])


class AZNet(nn.Module):
    def __init__(self, cfg: AZConfig):
        super().__init__()
        f = cfg.filters
        self.stem = nn.Sequential(nn.Conv2d(PLANES, f, 3, padding=1, bias=False), nn.BatchNorm2d(f), nn.ReLU())
        self.tower = nn.Sequential(*[SEBlock(f) for _ in range(cfg.blocks)])
        self.pol = nn.Sequential(nn.Conv2d(f, 73, 1))
        self.val = nn.Sequential(nn.Conv2d(f, 4, 1), nn.Flatten(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 1))

    def forward(self, x):
        h = self.tower(self.stem(x))
        policy = self.pol(h).permute(0, 2, 3, 1).reshape(x.shape[0], -1)
        value = torch.tanh(self.val(h)).squeeze(-1)
        return policy, value


# ----------------------------------------------------------------------------- graphed leaf evaluator

class GraphedEvaluator:
    def __init__(self, net, cfg, dev):
        self.net = net
        self.cfg = cfg
        self.dev = dev
        self.temperature = 1.0
        self.underpromo_idx = [i for i in range(POLICY_SIZE) if i % 73 >= 64]
        self.aux = torch.cuda.Stream()
        self.cap_stream = torch.cuda.Stream()
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.sx, self.smask, self.sout = {}, {}, {}, {}
        self.n_evals = 0
        self.value_ema = torch.zeros((), device=dev)

    def _evaluate(self, x, mask):
        policy, value = self.net(x)
        policy = policy / self.temperature  # HAZARD: python-scalar
        policy[:, self.underpromo_idx] -= 1.0  # HAZARD: host-sync
        alpha = np.random.dirichlet([self.cfg.dirichlet_alpha] * 8)  # HAZARD: host-code
        bias = torch.from_numpy(alpha).float().to(self.dev)  # HAZARD: pinned-memory
        policy = policy + self.cfg.noise_frac * bias.log().repeat(POLICY_SIZE // 8)
        policy = policy.masked_fill(~mask, float("-inf"))  # CLEAN: masked_fill keeps the shape
        with torch.cuda.stream(self.aux):  # HAZARD: stream
            self.value_ema.mul_(0.99).add_(0.01 * value.mean())
        if value.abs().max() > 0.999:  # HAZARD: dynamic-control-flow
            value = value * 0.999
        self.n_evals += x.shape[0]  # HAZARD: host-code
        return policy.softmax(-1), value

    def _capture(self, b):
        self.sx[b] = torch.zeros(b, PLANES, 8, 8, device=self.dev)
        self.smask[b] = torch.ones(b, POLICY_SIZE, dtype=torch.bool, device=self.dev)
        self.cap_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.cap_stream):
            for _ in range(3):
                self._evaluate(self.sx[b], self.smask[b])
            g = torch.cuda.CUDAGraph()
            g.capture_begin(pool=self.pool)  # CLEAN: capture on a side stream after warm-up
            self.sout[b] = self._evaluate(self.sx[b], self.smask[b])
            g.capture_end()
        torch.cuda.current_stream().wait_stream(self.cap_stream)
        self.graphs[b] = g

    def prepare(self):
        self.net.eval()
        with torch.no_grad():
            for b in self.cfg.buckets:
                self._capture(b)

    def new_game(self):
        for b in self.cfg.buckets:
            self.smask[b] = torch.ones(b, POLICY_SIZE, dtype=torch.bool, device=self.dev)  # HAZARD: static-address

    @torch.no_grad()
    def __call__(self, planes: np.ndarray, masks: np.ndarray):
        n = len(planes)
        b = next(k for k in self.cfg.buckets if k >= n)
        self.sx[b][:n].copy_(torch.from_numpy(planes).pin_memory(), non_blocking=True)  # CLEAN: pinned copy_ into the static input
        self.smask[b][:n].copy_(torch.from_numpy(masks).pin_memory(), non_blocking=True)
        self.graphs[b].replay()
        p, v = self.sout[b]
        return p[:n].float().cpu().numpy(), v[:n].float().cpu().numpy()  # CLEAN: host copy after the replay


# ----------------------------------------------------------------------------- MCTS (host)

class Node:
    __slots__ = ("prior", "visits", "value_sum", "children", "board")

    def __init__(self, prior, board=None):
        self.prior = prior
        self.visits = 0
        self.value_sum = 0.0
        self.children = {}
        self.board = board

    def q(self):
        return self.value_sum / self.visits if self.visits else 0.0


def select_child(node, c_puct):
    sqrt_n = math.sqrt(node.visits + 1)
    return max(node.children.items(),
               key=lambda kv: kv[1].q() + c_puct * kv[1].prior * sqrt_n / (1 + kv[1].visits))


def add_root_noise(root, cfg):
    moves = list(root.children)
    noise = np.random.dirichlet([cfg.dirichlet_alpha] * len(moves))  # CLEAN: Dirichlet root noise in host MCTS
    for mv, eps in zip(moves, noise):
        ch = root.children[mv]
        ch.prior = (1 - cfg.noise_frac) * ch.prior + cfg.noise_frac * eps


def expand(node, priors):
    for mv in node.board.legal_moves:
        node.children[mv] = Node(float(priors[move_index(mv)]))


def run_mcts(board, evaluator, cfg):
    root = Node(0.0, board.copy())
    p, _ = evaluator(encode_board(board)[None], legal_mask(board)[None])
    expand(root, p[0])
    add_root_noise(root, cfg)
    for _ in range(cfg.sims // cfg.leaf_batch):
        leaves, paths = [], []
        for _ in range(cfg.leaf_batch):
            node, path = root, [root]
            while node.children:
                mv, child = select_child(node, cfg.c_puct)
                if child.board is None:
                    child.board = node.board.copy()
                    child.board.push(mv)
                node = child
                path.append(node)
            node.visits += 1  # CLEAN: Python visit counter in host MCTS (virtual loss)
            leaves.append(node)
            paths.append(path)
        planes = np.stack([encode_board(l.board) for l in leaves])
        masks = np.stack([legal_mask(l.board) for l in leaves])
        pri, val = evaluator(planes, masks)
        for leaf, path, pr, v in zip(leaves, paths, pri, val):
            leaf.visits -= 1
            if leaf.board.is_game_over():
                res = leaf.board.result()
                v = 0.0 if res == "1/2-1/2" else -1.0
            else:
                expand(leaf, pr)
            for nd in reversed(path):
                nd.visits += 1
                nd.value_sum += v
                v = -v
    return root


def play_game(evaluator, cfg):
    board = chess.Board()
    history = []
    evaluator.new_game()
    while not board.is_game_over() and board.fullmove_number < 200:
        evaluator.temperature = 1.0 if board.fullmove_number <= cfg.temp_moves else 0.5
        root = run_mcts(board, evaluator, cfg)
        visits = np.zeros(POLICY_SIZE, dtype=np.float32)
        for mv, ch in root.children.items():
            visits[move_index(mv)] = ch.visits
        pi = visits / visits.sum()
        history.append((encode_board(board), pi, board.turn))
        if board.fullmove_number <= cfg.temp_moves:
            mv = random.choices(list(root.children), weights=[c.visits for c in root.children.values()])[0]  # CLEAN: host sampling in MCTS
        else:
            mv = max(root.children.items(), key=lambda kv: kv[1].visits)[0]
        board.push(mv)
    res = board.result()
    z = {"1-0": 1.0, "0-1": -1.0}.get(res, 0.0)
    return [(s, pi, z if turn == chess.WHITE else -z) for s, pi, turn in history], res


# ----------------------------------------------------------------------------- learner (torch.compile)

def az_loss(policy_logits, value, target_pi, target_z):
    p_loss = -(target_pi * F.log_softmax(policy_logits, -1)).sum(-1).mean()
    v_loss = F.mse_loss(value, target_z)
    print("value loss", v_loss)  # HAZARD: host-code
    if v_loss.item() > 2.0:  # HAZARD: host-sync
        v_loss = v_loss.clamp(max=2.0)
    return p_loss + v_loss


class Learner:
    def __init__(self, net, cfg):
        self.net = net
        self.cfg = cfg
        self.model_c = torch.compile(net, mode="reduce-overhead")
        self.loss_c = torch.compile(az_loss, mode="reduce-overhead")
        self.opt = torch.optim.SGD(net.parameters(), lr=cfg.lr, momentum=0.9, weight_decay=1e-4)
        self.step_c = torch.compile(self.opt.step, mode="reduce-overhead")
        self.steps = 0

    def lr_at(self, step):
        return self.cfg.lr * (0.1 if step > 100_000 else 1.0) * min(1.0, (step + 1) / 1000)

    def train(self, buffer, n_steps, dev):
        self.net.train()
        stats = []
        for _ in range(n_steps):
            n = min(len(buffer), self.cfg.batch)
            batch = random.sample(buffer, n)  # CLEAN: host sampling from the replay buffer
            s = torch.from_numpy(np.stack([b[0] for b in batch])).to(dev)
            pi = torch.from_numpy(np.stack([b[1] for b in batch])).to(dev)
            z = torch.tensor([b[2] for b in batch], device=dev, dtype=torch.float32)  # CLEAN: built from a list outside the compiled functions
            logits, value = self.model_c(s)  # HAZARD: dynamic-shape
            loss = self.loss_c(logits, value, pi, z)
            stats.append(loss.item())  # CLEAN: loss read before backward, outside the compiled functions
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.step_c()
            for g in self.opt.param_groups:
                g["lr"] = self.lr_at(self.steps)  # HAZARD: optimizer
            self.steps += 1
        return float(np.mean(stats))


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO)
    cfg = AZConfig(sims=args.sims)
    dev = torch.device("cuda")
    net = AZNet(cfg).to(dev)
    if args.resume:
        net.load_state_dict(torch.load(args.resume, map_location="cpu")["net"])
    evaluator = GraphedEvaluator(net, cfg, dev)
    learner = Learner(net, cfg)
    buffer = collections.deque(maxlen=cfg.buffer_size)
    results = collections.Counter()
    evaluator.prepare()
    for game in range(args.games):
        t0 = time.time()  # CLEAN: wall clock per game, outside the capture
        samples, res = play_game(evaluator, cfg)
        buffer.extend(samples)
        results[res] += 1
        log.info("game %d: %s in %d plies, %.1fs, %d evals", game, res, len(samples), time.time() - t0, evaluator.n_evals)
        if (game + 1) % args.train_every == 0 and len(buffer) >= 1024:
            loss = learner.train(list(buffer), args.train_steps, dev)
            print(f"after game {game + 1}: loss {loss:.3f} results {dict(results)}")
            evaluator.prepare()  # re-capture with the new weights in eval mode
            torch.save({"net": net.state_dict(), "games": game + 1}, cfg.ckpt)
            with open(os.path.splitext(cfg.ckpt)[0] + "_buffer.pkl", "wb") as f:
                pickle.dump(list(buffer)[-10_000:], f)


if __name__ == "__main__":
    main()
