"""Next-basket recommendations for a grocery delivery app ("buy it again" + discovery).

The basket-sequence model is compiled with mode="reduce-overhead" by the service
start-up code and handed to the Recommender object, which only sees a callable.
"""
import torch
import torch.nn as nn


class NextBasket(nn.Module):
    def __init__(self, n_items, d=128):
        super().__init__()
        self.item = nn.Embedding(n_items, d, padding_idx=0)
        self.gru = nn.GRU(d, d, batch_first=True)
        self.repeat_boost = 0.3          # per store format: how much "buy it again" dominates

    def forward(self, hist, freq, in_stock):
        # hist [B, n_baskets, basket_len] item ids (0 = pad); freq [B, n_items] past purchase counts
        e = self.item(hist)
        m = (hist > 0).float()[..., None]
        baskets = (e * m).sum(2) / m.sum(2).clamp_min(1.0)
        _, h = self.gru(baskets)
        scores = h[-1] @ self.item.weight.T
        boost = self.repeat_boost  # HAZARD: python-scalar
        scores = scores + boost * torch.log1p(freq)
        scores = scores.masked_fill(~in_stock, -1e4)  # CLEAN: masked_fill keeps the shape, no graph break
        print("max basket score", scores.amax())  # HAZARD: host-code
        return scores


class Recommender:
    def __init__(self, model, k=20, max_baskets=12, basket_len=24):
        self.model = model               # a compiled callable
        self.k, self.max_baskets, self.basket_len = k, max_baskets, basket_len
        self.cache = {}

    def _pad(self, hist):
        out = hist.new_zeros(hist.shape[0], self.max_baskets, self.basket_len)
        nb, nl = min(hist.shape[1], self.max_baskets), min(hist.shape[2], self.basket_len)
        out[:, -nb:, :nl] = hist[:, -nb:, :nl]
        return out

    @torch.no_grad()
    def recommend(self, hist, freq, in_stock):
        # one user per request: hist [1, n_baskets, basket_len], freq / in_stock [1, n_items]
        scores = self.model(self._pad(hist), freq, in_stock)  # CLEAN: padded to a fixed shape
        return scores.topk(self.k).indices  # CLEAN: output read right away, before the next compiled call

    @torch.no_grad()
    def warm_cache(self, users, hist_by_user, freq_by_user, in_stock):
        # before the Saturday peak, precompute scores for the most active users
        for u in users:
            h = hist_by_user[u]          # [1, n_baskets_u, longest_basket_u]
            s = self.model(h, freq_by_user[u], in_stock)  # HAZARD: dynamic-shape
            self.cache[u] = s  # HAZARD: static-address

    @torch.no_grad()
    def warm_cache_padded(self, users, hist_by_user, freq_by_user, in_stock):
        for u in users:
            s = self.model(self._pad(hist_by_user[u]), freq_by_user[u], in_stock)
            self.cache[u] = s.clone()  # CLEAN: cloned before the next compiled call

    def from_cache(self, u):
        return self.cache[u].topk(self.k).indices


def serve(stores, model, requests):
    rec = Recommender(torch.compile(model, mode="reduce-overhead"))
    for store in stores:
        model.repeat_boost = store.repeat_boost
        for hist, freq, stock in requests(store):
            yield store.id, rec.recommend(hist.cuda(), freq.cuda(), stock.cuda())


def saturday_prep(rec, store, activity_log):
    users = activity_log.top_users(store, n=5000)
    hist = {u: activity_log.baskets(u).cuda() for u in users}
    freq = {u: activity_log.counts(u).cuda() for u in users}
    rec.warm_cache(users, hist, freq, store.in_stock_mask().cuda())
    return {u: rec.from_cache(u) for u in users}
