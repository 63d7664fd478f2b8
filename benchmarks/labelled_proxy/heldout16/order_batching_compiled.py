"""Order batching for a fulfilment centre: group pick orders into cart-sized batches.

Each order is summarised by an aisle histogram (48 aisles) and its item count.
An attention policy (trained offline with REINFORCE on pick-path length) scores
order-to-cart affinities; carts are filled greedily up to the cart capacity.
Planning runs per wave with a reduce-overhead compile via functools.partial.
"""
import functools
from dataclasses import dataclass

import torch
import torch.nn as nn

N_AISLES, MAX_CARTS, MAX_ORDERS = 48, 32, 512
cg_compile = functools.partial(torch.compile, mode="reduce-overhead")
CONFIG = {"cart_capacity": 24}


class BatchingPolicy(nn.Module):
    def __init__(self, d: int = 64):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(N_AISLES + 1, d), nn.ReLU(), nn.Linear(d, d))
        self.carts = nn.Parameter(torch.randn(MAX_CARTS, d) * 0.1)

    def encode(self, orders, items):
        return self.enc(torch.cat([orders, items[:, None]], -1))


policy = BatchingPolicy().cuda().eval()


@cg_compile
def assign_carts(orders, items):
    emb = policy.encode(orders, items)
    aff = torch.softmax(emb @ policy.carts.t(), dim=-1)            # (n_orders, carts)
    cap = CONFIG["cart_capacity"]  # HAZARD: python-scalar
    choice = aff.argmax(-1)
    onehot = torch.nn.functional.one_hot(choice, MAX_CARTS).float()  # CLEAN: one_hot with num_classes
    load = (onehot * items[:, None]).cumsum(0)                       # running items per cart
    over = (load * onehot).sum(-1) > cap
    assign = torch.where(over, -1, choice)  # CLEAN: overflow orders marked with torch.where, fixed shape
    used = int(assign.max()) + 1  # HAZARD: host-sync
    return assign, used


@dataclass
class Wave:
    orders: torch.Tensor          # (n, N_AISLES) aisle histogram
    items: torch.Tensor           # (n,)
    cold_chain: bool = False

    def padded(self):
        n = self.orders.shape[0]
        o = torch.zeros(MAX_ORDERS, N_AISLES, device=self.orders.device)
        i = torch.zeros(MAX_ORDERS, device=self.orders.device)
        o[:n], i[:n] = self.orders, self.items
        return o, i, n


@torch.no_grad()
def plan_shift(waves):
    plans = []
    for wave in waves:
        CONFIG["cart_capacity"] = 16 if wave.cold_chain else 24       # insulated totes are smaller
        assign, used = assign_carts(wave.orders, wave.items)  # HAZARD: dynamic-shape
        plans.append(assign.clone())  # CLEAN: cloned before it is kept
    return plans


@torch.no_grad()
def plan_shift_padded(waves):
    plans = []
    for wave in waves:
        o, i, n = wave.padded()
        assign, used = assign_carts(o, i)  # CLEAN: padded to MAX_ORDERS, one graph
        plans.append(assign)  # HAZARD: static-address
    return [p[: w.orders.shape[0]] for p, w in zip(plans, waves)]


def pick_lists(plan: torch.Tensor, order_ids):
    carts = {}
    for oid, cart in zip(order_ids, plan.tolist()):  # CLEAN: eager, after planning
        carts.setdefault(cart, []).append(oid)
    return carts


if __name__ == "__main__":
    g = torch.Generator().manual_seed(0)
    waves = [Wave(torch.rand(n, N_AISLES, generator=g).cuda(), torch.randint(1, 6, (n,), generator=g).float().cuda(),
                  cold_chain=(k % 4 == 0)) for k, n in enumerate((180, 240, 95, 310, 150))]
    print([len(pick_lists(p, range(p.numel()))) for p in plan_shift(waves)])
    print([p.shape for p in plan_shift_padded(waves)])
