"""The decode loop's bookkeeping kernel against the PyTorch operations it replaces."""
import torch

from fastpath.engine.advance import advance
from tests.conftest import DEVICE


def test_advance_matches_the_pytorch_steps():
    g = torch.Generator().manual_seed(0)
    batch, B, R = 5, 3, 6
    tok = torch.randint(0, 1000, (batch,), generator=g).to(DEVICE)
    pos = torch.randint(0, 50, (batch,), generator=g).to(DEVICE)
    kv_len = (pos + 1).to(torch.int32)
    ring = torch.randint(0, 1000, (R, batch), generator=g).to(DEVICE)
    step = torch.tensor([7], device=DEVICE)
    want = [t.clone() for t in (tok, pos, kv_len, ring, step)]
    for _ in range(R + 1):  # past the ring's end: slots wrap
        nxt = torch.randint(0, 1000, (B,), generator=g).to(DEVICE)
        advance(nxt, tok[:B], pos[:B], kv_len[:B], ring, step)
        wt, wp, wk, wr, ws = want
        wt[:B] = nxt
        wp[:B] += 1
        wk[:B] = (wp[:B] + 1).to(torch.int32)
        wr[int(ws) % R, :B] = nxt
        ws += 1
    for got, w in zip((tok, pos, kv_len, ring, step), want):
        assert got.dtype == w.dtype and torch.equal(got, w)
