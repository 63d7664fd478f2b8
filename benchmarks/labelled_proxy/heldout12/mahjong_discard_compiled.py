"""Riichi mahjong bot for an online parlour (Suphx-style discard model).

Each turn the game server sends the seat's observation planes (own hand,
melds, rivers, dora, riichi flags, shanten estimate; 34 tile columns). The
discard policy proposes a tile, and a value head estimates the hand's
expected points so the bot can decide whether to push or fold. The serving
functions are swapped for compiled versions at start-up.
"""
import random

import torch
import torch.nn as nn

N_CH, N_TILES, SHANTEN_CH, EPS = 64, 34, 7, 0.02


class PlaneNet(nn.Module):
    def __init__(self, out, ch=128, blocks=6):
        super().__init__()
        self.stem = nn.Conv1d(N_CH, ch, 3, padding=1)
        self.body = nn.Sequential(*[nn.Sequential(nn.Conv1d(ch, ch, 3, padding=1), nn.BatchNorm1d(ch), nn.ReLU())
                                    for _ in range(blocks)])
        self.head = nn.Conv1d(ch, out, 1)

    def forward(self, x):
        return self.head(self.body(torch.relu(self.stem(x))))


policy_net = PlaneNet(1).cuda().eval()
value_net = nn.Sequential(nn.Linear(N_CH * N_TILES + N_TILES, 256), nn.ReLU(), nn.Linear(256, 1)).cuda().eval()


def discard_policy(obs, hand_counts):
    logits = policy_net(obs).squeeze(1)
    logits = logits.masked_fill(hand_counts == 0, float("-inf"))  # CLEAN: illegal tiles masked, shape unchanged
    if random.random() < EPS:  # HAZARD: host-code
        logits = torch.zeros_like(logits).masked_fill(hand_counts == 0, float("-inf"))
    probs = logits.softmax(-1)
    sampled = torch.multinomial(probs, 1).squeeze(1)  # CLEAN: multinomial stays inside the graph
    return probs, sampled


def hand_value(obs, probs):
    shanten = obs[:, SHANTEN_CH].sum(-1)
    v = value_net(torch.cat([obs.flatten(1), probs], -1)).squeeze(-1)
    if (shanten == 0).any():  # HAZARD: dynamic-control-flow
        v = v + 1000.0 * (shanten == 0).float()
    deal_in = torch.sigmoid(-v / 2000.0)
    risk = deal_in.max().item()  # HAZARD: host-sync
    return v, deal_in, risk > 0.6


def review_game(obs_seq, chosen):
    probs = torch.stack([policy_net(o).squeeze(1).softmax(-1) for o in obs_seq])
    print("review: mean chosen-tile prob", probs.gather(-1, chosen[..., None]).mean())  # CLEAN: default torch.compile, no CUDA graphs
    return probs


@torch.no_grad()
def serve_turn(obs, hand_counts):
    v, deal_in, fold = hand_value(obs, discard_policy(obs, hand_counts)[0])  # HAZARD: static-address
    return v.clone(), fold


@torch.no_grad()
def serve_turn_safe(obs, hand_counts):
    probs, sampled = discard_policy(obs, hand_counts)
    probs, sampled = probs.clone(), sampled.clone()  # CLEAN: cloned before handing them to the next compiled function
    v, deal_in, fold = hand_value(obs, probs)
    return sampled, v.clone(), fold


def main():
    global discard_policy, hand_value, review_game
    discard_policy = torch.compile(discard_policy, mode="reduce-overhead")
    hand_value = torch.compile(hand_value, mode="reduce-overhead")
    review_game = torch.compile(review_game)
    for turn in range(10_000):
        obs = (torch.rand(8, N_CH, N_TILES, device="cuda") > 0.9).float()
        hand = (obs[:, 0] > 0).float()
        if turn % 2:
            v, fold = serve_turn(obs, hand)
        else:
            tile, v, fold = serve_turn_safe(obs, hand)
    with torch.no_grad():
        review_game([obs] * 4, torch.zeros(4, 8, dtype=torch.long, device="cuda"))


if __name__ == "__main__":
    main()
