"""'Which size should I order?' advisor for an apparel shop.

For a page of (customer, garment) pairs, every size of the garment's size chart is
scored as runs-small / fits / runs-large. One CUDA graph per product category.
"""
import torch
import torch.nn as nn

CATEGORIES = ("tops", "bottoms", "dresses", "outerwear")
N_SIZES = 8   # XXS .. 3XL


class FitModel(nn.Module):
    def __init__(self, n_users, n_garments, d=32):
        super().__init__()
        self.user = nn.Embedding(n_users, d)
        self.garment = nn.Embedding(n_garments, d)
        self.meas = nn.Linear(6, d)     # chest, waist, hip, length, sleeve, stretch (cm)
        self.fit = nn.Sequential(nn.Linear(3 * d, 64), nn.ReLU(), nn.Linear(64, 3))

    def forward(self, u, g, m):
        return self.fit(torch.cat([self.user(u), self.garment(g), self.meas(m)], -1))


class SizeAdvisor:
    def __init__(self, model, size_chart, batch=64, device="cuda"):
        self.model = model.eval().to(device)
        self.size_chart_np = size_chart          # dict: category -> np.float32 [N_SIZES, 6]
        self.device = device
        self.pool = torch.cuda.graph_pool_handle()
        self.expl_stream = torch.cuda.Stream()
        self.graphs, self.io = {}, {}
        self.mean_fit = {c: torch.zeros((), device=device) for c in CATEGORIES}
        self.expl = {c: torch.zeros(batch, N_SIZES, device=device) for c in CATEGORIES}
        for cat in CATEGORIES:
            self._capture(cat, batch)

    def _recommend(self, cat, u, g, avail):
        chart = torch.as_tensor(self.size_chart_np[cat], device="cuda")  # HAZARD: pinned-memory
        B = u.shape[0]
        uu = u[:, None].expand(B, N_SIZES).reshape(-1)
        gg = g[:, None].expand(B, N_SIZES).reshape(-1)
        logits = self.model(uu, gg, chart.repeat(B, 1)).view(B, N_SIZES, 3)
        probs = logits.softmax(-1)
        p_fit = probs[..., 1].masked_fill(~avail, 0.0)  # CLEAN: masked_fill keeps the shape
        in_stock = p_fit[avail]  # HAZARD: dynamic-shape
        self.mean_fit[cat].copy_(in_stock.mean())
        with torch.cuda.stream(self.expl_stream):  # HAZARD: stream
            self.expl[cat].copy_(probs[..., 0] - probs[..., 2])   # > 0: runs small
        return p_fit.argmax(-1), p_fit

    @torch.no_grad()
    def _capture(self, cat, batch):
        u = torch.zeros(batch, dtype=torch.long, device=self.device)
        g = torch.zeros(batch, dtype=torch.long, device=self.device)
        avail = torch.ones(batch, N_SIZES, dtype=torch.bool, device=self.device)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._recommend(cat, u, g, avail)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            best, p = self._recommend(cat, u, g, avail)
        self.graphs[cat], self.io[cat] = graph, (u, g, avail, best, p)

    def _load(self, cat, users, garments, avail):
        u, g, a, best, p = self.io[cat]
        u.copy_(users)  # CLEAN: copy_ into the static inputs
        g.copy_(garments)
        a.copy_(avail)
        self.graphs[cat].replay()
        return best, p

    @torch.no_grad()
    def recommend_page(self, cat, users, garments, avail):
        best, p = self._load(cat, users, garments, avail)
        return best.clone(), p.clone()  # CLEAN: cloned before the next replay

    @torch.no_grad()
    def recommend_catalogue(self, cat, pages):
        # nightly email campaign: precompute sizes for every customer page
        out = []
        for users, garments, avail in pages:
            best, _ = self._load(cat, users, garments, avail)
            out.append(best)  # HAZARD: static-address
        return torch.cat(out)
