"""FP8Linear and quantize_: weight-only FP8 layers swapped into small models."""
import math

import pytest
import torch
from torch import nn

from fastpath.nn import FP8Linear, quantize_
from fastpath.nn.fp8_linear import quantize_rowwise
from tests.conftest import randn
from tests.tolerances import assert_close

pytestmark = pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="torch has no float8_e4m3fn")


def sqnr_db(out, ref):
    out, ref = out.double().cpu(), ref.double().cpu()
    return 10 * math.log10(ref.pow(2).sum().item() / max((out - ref).pow(2).sum().item(), 1e-300))


class MLP(nn.Module):
    def __init__(self, d=67, h=200, v=13, dtype=torch.bfloat16, device="cpu"):
        super().__init__()
        self.up = nn.Linear(d, h, dtype=dtype, device=device)
        self.act = nn.GELU()
        self.down = nn.Linear(h, d, bias=False, dtype=dtype, device=device)
        self.lm_head = nn.Linear(d, v, dtype=dtype, device=device)

    def forward(self, x):
        return self.lm_head(self.down(self.act(self.up(x))))


def weight_bytes(model):
    return sum(m.weight.numel() * m.weight.element_size() for m in model.modules()
               if isinstance(m, (nn.Linear, FP8Linear)))


def scale_bytes(model):
    return sum(m.weight_scale.numel() * 4 for m in model.modules() if isinstance(m, FP8Linear))


def test_quantize_rowwise(device):
    w = randn(13, 67, device=device)
    w[3] = 0  # a zero row gets scale 1
    q, s = quantize_rowwise(w)
    assert q.dtype == torch.float8_e4m3fn and s.dtype == torch.float32 and s.shape == (13, 1)
    assert s[3].item() == 1.0 and (q[3].float() == 0).all()
    assert torch.isfinite(q.float()).all() and q.float().abs().amax(1)[torch.arange(13) != 3].eq(448).all()
    assert sqnr_db(q.float() * s, w) >= 25


def test_from_linear_forward(device):
    lin = nn.Linear(200, 67, dtype=torch.bfloat16, device=device)
    q = FP8Linear.from_linear(lin)
    assert q.weight.dtype == torch.float8_e4m3fn and q.weight.shape == (67, 200)
    assert q.weight_scale.shape == (67, 1) and q.bias.dtype == torch.bfloat16
    for shape in [(1, 1, 200), (3, 1, 200), (20, 200)]:
        x = randn(*shape, dtype=torch.bfloat16, device=device)
        out = q(x)
        assert out.dtype == torch.bfloat16 and out.shape == (*shape[:-1], 67)
        deq = q.weight.double() * q.weight_scale.double()
        assert_close(out, x.double() @ deq.t() + q.bias.double(), tol=1.2e-2)
        with torch.no_grad():
            assert sqnr_db(out, lin(x)) >= 25


def test_quantize_mlp(device):
    model = MLP(device=device)
    x = randn(3, 1, 67, dtype=torch.bfloat16, device=device)
    with torch.no_grad():
        ref = model(x)
    before = weight_bytes(model)
    assert quantize_(model) is model
    assert isinstance(model.up, FP8Linear) and isinstance(model.down, FP8Linear)
    assert type(model.lm_head) is nn.Linear  # the default filter keeps lm_head
    lm = model.lm_head.weight.numel() * 2
    assert weight_bytes(model) - lm <= 0.5 * (before - lm) + scale_bytes(model)
    out = model(x)
    assert out.dtype == torch.bfloat16 and sqnr_db(out, ref) >= 20
    assert "FP8Linear(in_features=67, out_features=200" in repr(model)
    assert "float8_e4m3fn" in repr(model.up) and "bias=None" in repr(model.down)


def test_filter_fn_and_sequential(device):
    seq = nn.Sequential(nn.Linear(13, 67), nn.ReLU(), nn.Sequential(nn.Linear(67, 67), nn.Linear(67, 7)))
    seq.to(device)
    seen = []

    def keep_nested(module, name):
        seen.append(name)
        return name.startswith("2.")

    quantize_(seq, keep_nested)
    assert seen == ["0", "2.0", "2.1"]
    assert type(seq[0]) is nn.Linear and isinstance(seq[2][0], FP8Linear) and isinstance(seq[2][1], FP8Linear)
    assert seq[2][0].bias.dtype == torch.float32
    x = randn(2, 13)
    assert seq(x).shape == (2, 7)
    everything = quantize_(MLP(device=device), lambda m, n: True)
    assert isinstance(everything.lm_head, FP8Linear)
    # a bare Linear cannot replace itself: the return value is the new module
    assert isinstance(quantize_(nn.Linear(13, 7, device=device)), FP8Linear)


def test_mha_out_proj_untouched_by_default():
    mha = nn.MultiheadAttention(16, 2)
    quantize_(mha)
    assert type(mha.out_proj) is not FP8Linear


def test_state_dict_round_trip(device):
    q = FP8Linear.from_linear(nn.Linear(67, 13, dtype=torch.bfloat16, device=device))
    sd = q.state_dict()
    assert set(sd) == {"weight", "weight_scale", "bias"} and sd["weight"].dtype == torch.float8_e4m3fn
    fresh = FP8Linear(67, 13, device=device)
    fresh.load_state_dict(sd)
    for k in sd:
        assert torch.equal(fresh.state_dict()[k].view(torch.uint8) if k == "weight" else fresh.state_dict()[k],
                           sd[k].view(torch.uint8) if k == "weight" else sd[k])
    x = randn(2, 67, dtype=torch.bfloat16, device=device)
    assert torch.equal(fresh(x), q(x))
    model = quantize_(MLP(device=device))
    model2 = quantize_(MLP(device=device))
    model2.load_state_dict(model.state_dict())
    x = randn(1, 67, dtype=torch.bfloat16, device=device)
    assert torch.equal(model2(x), model(x))


def test_to_keeps_fp8(device):
    q = FP8Linear.from_linear(nn.Linear(67, 13, dtype=torch.bfloat16))
    w = q.weight.clone()
    q = q.to(device)
    assert q.weight.device.type == device.type and q.weight_scale.device.type == device.type
    q = q.to(torch.float16)  # casts the bias only
    assert q.weight.dtype == torch.float8_e4m3fn and q.weight_scale.dtype == torch.float32
    assert q.bias.dtype == torch.float16 and torch.equal(q.weight.cpu().view(torch.uint8), w.view(torch.uint8))
    x = randn(2, 67, dtype=torch.float16, device=device)
    assert q(x).dtype == torch.float16


def test_errors(device):
    with pytest.raises(NotImplementedError, match="dtype"):
        quantize_(MLP(), dtype=torch.float8_e5m2)
    q = FP8Linear(67, 13, device=device)
    with pytest.raises(TypeError, match="bias"):
        q(randn(1, 67, device=device))  # float32 input, bfloat16 bias
    with pytest.raises(ValueError, match="weight"):
        q(randn(1, 66, dtype=torch.bfloat16, device=device))
    with pytest.raises(TypeError, match="model: expected a torch.nn.Module, got int"):
        quantize_(3)
    with pytest.raises(TypeError, match="filter_fn"):
        quantize_(MLP(), "lm_head")
    with pytest.raises(TypeError, match="linear_: expected a torch.nn.Linear, got Conv1d"):
        FP8Linear.from_linear(torch.nn.Conv1d(2, 2, 1))


def test_quantize_a_transformers_model(device):
    """quantize_ on a Hugging Face model (a small random Qwen3, bfloat16): every projection of
    its layers becomes FP8 (lm_head kept), generate() runs, the logits stay close to the bf16
    model's, and the quantised state_dict loads into a second quantised copy."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.Qwen3Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                   max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.Qwen3ForCausalLM(cfg).to(device=device, dtype=torch.bfloat16).eval()
    ids = torch.randint(0, 256, (2, 8), device=device)
    with torch.no_grad():
        ref = model(ids).logits
    names = [n for n, m in model.named_modules() if type(m) is nn.Linear and not n.endswith("lm_head")]
    assert len(names) == 7  # q, k, v, o, gate, up, down
    quantize_(model)
    mods = dict(model.named_modules())
    assert all(isinstance(mods[n], FP8Linear) for n in names) and type(model.lm_head) is nn.Linear
    with torch.no_grad():
        out = model(ids).logits
        gen = model.generate(ids[:1], max_new_tokens=2, do_sample=False)
    assert sqnr_db(out, ref) >= 20, f"logits SQNR {sqnr_db(out, ref):.1f} dB"
    assert gen.shape == (1, 10)
    twin = transformers.Qwen3ForCausalLM(cfg).to(device=device, dtype=torch.bfloat16).eval()
    quantize_(twin)
    twin.load_state_dict(model.state_dict())
    with torch.no_grad():
        assert torch.equal(twin(ids).logits, out)
