"""The embedded checkpoint and the command line: same text as transformers, clear errors."""
import os

import pytest
import torch

transformers = pytest.importorskip("transformers")

from fastpath import cli  # noqa: E402
from fastpath.engine.commands import DEFAULT_MODEL, DEFAULT_PROMPT  # noqa: E402
from fastpath.engine.generate import Engine, SamplingParams, generate  # noqa: E402
from fastpath.engine.tokenizer import StreamDecoder, Tokenizer  # noqa: E402
from fastpath.models.loader import load  # noqa: E402
from tests.conftest import DEVICE, greedy_ours_cpu  # noqa: E402



def test_embedded_checkpoint_generates_what_transformers_generates(reference_paths):
    tok = Tokenizer(DEFAULT_MODEL)
    hf_tok = transformers.AutoTokenizer.from_pretrained(DEFAULT_MODEL)
    ids = tok.encode(DEFAULT_PROMPT)
    assert ids == hf_tok(DEFAULT_PROMPT)["input_ids"]
    hf = transformers.AutoModelForCausalLM.from_pretrained(DEFAULT_MODEL, dtype=torch.float32).eval()
    x = torch.tensor([ids])
    want = hf.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=40, do_sample=False)[0, len(ids):]
    want_text = hf_tok.decode(want, skip_special_tokens=True)
    eos = tok.token_id(tok.eos)
    if eos in want.tolist():
        want_text = hf_tok.decode(want[: want.tolist().index(eos)], skip_special_tokens=True)
    model = load(DEFAULT_MODEL, device=DEVICE, dtype=torch.float32, progress=False)
    eng = Engine(model, max_seq=64)
    text = generate(eng, tok, DEFAULT_PROMPT, 40, SamplingParams(0.0))
    assert text == want_text
    assert len(text) > 40  # real text, not an early stop


def test_embedded_model_under_another_default_device_or_dtype(reference_paths):
    """torch's default device elsewhere ("meta": no data) or its default dtype float16 (as model
    constructors set it for a while) changes nothing: the loader, the model and the engine name the
    device and dtype of every tensor they make."""
    ids = Tokenizer(DEFAULT_MODEL).encode(DEFAULT_PROMPT)
    want = greedy_ours_cpu(DEFAULT_MODEL, ids, 8)
    assert greedy_ours_cpu(DEFAULT_MODEL, ids, 8, "meta") == want
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float16)
    try:
        assert greedy_ours_cpu(DEFAULT_MODEL, ids, 8) == want
    finally:
        torch.set_default_dtype(old)


def test_stream_decoder_pieces_add_up():
    tok = Tokenizer(DEFAULT_MODEL)
    text = "for x in range(10):\n    print(x)  # é"
    ids = tok.encode(text)
    dec = StreamDecoder(tok)
    assert "".join(dec.add([i]) for i in ids) == tok.decode(ids) == text


def test_cli_generate_and_errors(capsys, tmp_path, reference_paths):
    assert cli.main(["generate", "--max-new-tokens", "8", "--temperature", "0"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(DEFAULT_PROMPT) and len(out) > len(DEFAULT_PROMPT)
    assert "tok/s" in err
    for extra in (["generate", "--prompt", "x"], ["bench-decode"]):
        assert cli.main(extra[:1] + ["--model", str(tmp_path / "nope")] + extra[1:]) == 1
        assert f"--model: '{tmp_path / 'nope'}' is not a directory" in capsys.readouterr().err
    assert cli.main(["generate", "--model", str(tmp_path), "--prompt", "x"]) == 1
    err = capsys.readouterr().err
    assert "error" in err and str(tmp_path) in err
    (tmp_path / "config.json").write_text('{"model_type": "gpt2"}')  # the architecture is said first
    assert cli.main(["generate", "--model", str(tmp_path), "--prompt", "x"]) == 1
    assert "model_type 'gpt2' is not supported" in capsys.readouterr().err
    assert cli.main(["bench-decode", "--config", "qwen3-8b"]) == 1
    assert "--random-weights" in capsys.readouterr().err
    assert cli.main(["bench-decode", "--config", "nope", "--random-weights"]) == 1
    assert "qwen3-30b-a3b" in capsys.readouterr().err
    # longer than the embedded model's 1024 positions: said before any weight loads
    assert cli.main(["generate", "--max-new-tokens", "5000"]) == 1
    err = capsys.readouterr().err
    assert "--max-new-tokens: at most" in err and "1024 positions" in err and "loading" not in err
    assert cli.main(["generate", "--prompt", "def f(x): return x " * 400]) == 1
    assert "--prompt:" in capsys.readouterr().err
    # bad numbers are said before any file is read (here: a directory without a config) or text is written
    for bad, said in ((["--max-new-tokens", "0"], "--max-new-tokens: expected >= 1, got 0"),
                      (["--temperature", "-1"], "temperature: expected a finite value >= 0"),
                      (["--temperature", "1", "--top-p", "1.5"], "top_p: expected"),
                      (["--temperature", "1", "--top-k", "0"], "top_k: expected")):
        assert cli.main(["generate", "--model", str(tmp_path / "empty"), "--prompt", "x"] + bad) == 1
        out, err = capsys.readouterr()
        assert said in err and out == "", (bad, err)
    for flag in ("--batch", "--prompt-len", "--new-tokens", "--layers"):  # before building 8B of random weights
        assert cli.main(["bench-decode", "--config", "qwen3-8b", "--random-weights", flag, "0"]) == 1
        err = capsys.readouterr().err
        assert f"{flag}: expected >= 1, got 0" in err and "building" not in err, (flag, err)


def test_engine_argument_errors(reference_paths):
    model = load(DEFAULT_MODEL, device=DEVICE, dtype=torch.float32, progress=False)
    eng = Engine(model, max_seq=16)
    with pytest.raises(ValueError, match="max_new_tokens"):
        list(eng.generate_step([[1, 2, 3]], 20))
    with pytest.raises(ValueError, match="prompts"):
        list(eng.generate_step([], 2))
    with pytest.raises(ValueError, match="batch"):
        list(eng.generate_step([[1], [2]], 2))
    with pytest.raises(ValueError, match="token ids"):
        list(eng.generate_step([[10**6]], 2))


@pytest.mark.parametrize("lag", [1, 3])
def test_token_ring_wraps(lag, reference_paths):
    """Tokens come back through a device ring of lag + 2 slots: with lag 1 (3 slots) and 3,
    30 steps wrap it many times and give the tokens of a step-by-step greedy decode of the
    same model (logits argmax, one position at a time, no engine)."""
    model = load(DEFAULT_MODEL, device=DEVICE, dtype=torch.float32, progress=False)
    prompt = [5, 17, 99, 3]
    got = [r[0] for r in Engine(model, max_seq=48, lag=lag, graphs=False, side_stream=False)
           .generate_step([prompt], 30)]
    hf = transformers.AutoModelForCausalLM.from_pretrained(DEFAULT_MODEL, dtype=torch.float32).eval()
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(30):
            ids.append(int(hf(torch.tensor([ids])).logits[0, -1].argmax()))
    assert got == ids[len(prompt):]
    if DEVICE.type == "cpu":
        with pytest.raises(ValueError, match="side_stream"):
            Engine(model, max_seq=48, side_stream=True)


def test_bench_run_on_the_embedded_model(reference_paths):
    """The decode benchmark's loop (a first run, then three timed: medians) and its
    bytes-per-token count, checked against the model's own tensors."""
    from fastpath.engine import bench

    model = load(DEFAULT_MODEL, device=DEVICE, dtype=torch.float32, progress=False)
    r = bench.run(model, prompt_len=8, new_tokens=4)
    assert r["new_tokens"] == 4 and r["decode_tps"] > 0 and r["prefill_tps"] > 0 and r["timed_runs"] == 3
    cfg = model.cfg
    # independent count: every buffer except the experts and the embedding, plus top-k experts
    # and one embedding row
    total = sum(b.numel() for n, b in model.named_buffers() if n != "inv_freq")
    experts = sum(L.ffn.gate_up.numel() + L.ffn.down.numel() for L in model.layers if L.moe)
    active = total - experts - model.embed.numel() + experts * cfg.top_k // cfg.num_experts + cfg.hidden_size
    if model.lm_head is None:  # tied head: the embedding is read whole by the LM head
        active += model.embed.numel()
    kv = 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * 4 * (8 + 2)
    assert abs(bench.bytes_per_token(model, 8 + 2) - (4 * active + kv)) <= 4 * 4 * cfg.hidden_size


def test_chat_template_matches_transformers(tmp_path):
    """The chat template is rendered as transformers renders it (same token ids)."""
    import json
    import shutil

    shutil.copy(os.path.join(DEFAULT_MODEL, "tokenizer.json"), tmp_path / "tokenizer.json")
    template = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|endoftext|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|assistant|>\n"
                "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n{% endif %}"
                "{% endif %}")
    cfg = json.load(open(os.path.join(DEFAULT_MODEL, "tokenizer_config.json")))
    cfg["chat_template"] = template
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(cfg))
    tok = Tokenizer(str(tmp_path))
    hf_tok = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is a list?"}]
    want = hf_tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
    want = want["input_ids"] if isinstance(want, dict) or hasattr(want, "keys") else want
    assert tok.encode("What is a list?", chat=True, system="Be brief.") == list(want)
    off = hf_tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, enable_thinking=False)
    off = off["input_ids"] if isinstance(off, dict) or hasattr(off, "keys") else off
    assert len(off) > len(want)  # the variable reaches the template: the empty think block
    assert tok.encode("What is a list?", chat=True, system="Be brief.", enable_thinking=False) == list(off)
    with pytest.raises(ValueError, match="chat template"):
        Tokenizer(DEFAULT_MODEL).encode("x", chat=True)


def test_cli_keeps_an_fp8_checkpoint_fp8(capsys, tmp_path, reference_paths):
    """A checkpoint that stores float8 weights (per-channel ``weight_scale``) loads as FP8
    without --fp8, and dequantised with --no-fp8; both generate."""
    import shutil

    from fastpath.models import safetensors as st
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8_e4m3fn")
    path = tmp_path / "fp8"
    shutil.copytree(DEFAULT_MODEL, path)
    f = st.SafetensorsFile(str(path / "model.safetensors"))
    tensors = {k: f.get(k).clone() for k in f.keys()}
    del f
    out = {}
    for k, v in tensors.items():
        if k.endswith("proj.weight") and v.dim() == 2:
            s = (v.float().abs().amax(dim=1, keepdim=True) / 448).clamp_min(1e-12)
            out[k], out[k[:-len("weight")] + "weight_scale"] = (v.float() / s).to(torch.float8_e4m3fn), s
        else:
            out[k] = v
    assert any(k.endswith("weight_scale") for k in out)
    st.save(out, str(path / "model.safetensors"))
    for flags, fp8 in (([], True), (["--no-fp8"], False)):
        assert cli.main(["generate", "--model", str(path), "--prompt", "The", "--max-new-tokens", "3",
                         "--temperature", "0", *flags]) == 0
        err = capsys.readouterr().err
        assert ("FP8 checkpoint" in err) == fp8 and ("fp8 weights" in err) == fp8, err


def test_recorded_command_is_the_parsed_one(monkeypatch):
    """Results record the arguments main() parsed, not the interpreter's own sys.argv."""
    from fastpath.engine import commands
    seen = []
    monkeypatch.setattr(commands, "bench_decode", lambda args: seen.append(commands.command_line(args)) or 0)
    monkeypatch.setattr("sys.argv", ["-c"])
    assert cli.main(["bench-decode", "--config", "qwen3-8b", "--random-weights", "--json", "a b.jsonl"]) == 0
    assert seen == ["fastpath bench-decode --config qwen3-8b --random-weights --json 'a b.jsonl'"]


def test_cli_bench_decode_on_a_checkpoint(capsys, tmp_path, reference_paths):
    """``fastpath bench-decode --model DIR`` end to end on the embedded checkpoint."""
    out_json = tmp_path / "decode.jsonl"
    assert cli.main(["bench-decode", "--model", DEFAULT_MODEL, "--prompt-len", "8", "--new-tokens", "4",
                     "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "decode" in out and "GB/token" in out
    import json
    rec = json.loads(out_json.read_text().splitlines()[-1])  # the record --json asked for
    assert rec["model"] == "default" and rec["decode_tps"] > 0 and rec["new_tokens"] == 4
    if DEVICE.type == "cuda":  # with the roofline fraction
        assert 0 < rec["pct_roofline"]
