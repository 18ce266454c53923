"""The package shell: import without Triton, info(), the CLI, path choice and registration."""
import json
import subprocess
import sys

import pytest
import torch

import fastpath
from fastpath import cli
from fastpath._core import backend
from fastpath._core.errors import normalize_dim, require_fp8


def test_import_without_triton_or_gpu():
    """A fresh interpreter where `import triton` fails still imports fastpath and runs an op."""
    code = (
        "import sys; sys.modules['triton'] = None\n"
        "import torch, fastpath\n"
        "r = fastpath.info(file=False)\n"
        "assert r['ops']['softmax']['path'] == 'reference', r\n"
        "assert 'Triton is not importable' in r['ops']['softmax']['why']\n"
        "x = torch.randn(3, 5)\n"
        "assert torch.allclose(fastpath.softmax(x), torch.softmax(x, -1))\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_info_report(capsys):
    r = fastpath.info()
    text = capsys.readouterr().out
    assert r["torch"] == torch.__version__ and r["torch"] in text
    assert set(r["ops"]) >= {"softmax", "sampling"}
    for fam in r["ops"].values():
        assert fam["path"] in ("triton", "reference") and fam["why"]
    expect = "triton" if backend.triton_reason(backend.default_device()) is None else "reference"
    assert r["ops"]["softmax"]["path"] == expect


def test_info_reference_on_meta_device():
    """A device the kernels cannot serve is reported as the reference path, with the reason."""
    r = fastpath.info("meta", file=False)
    assert r["ops"]["softmax"]["path"] == "reference"
    assert "meta" in r["ops"]["softmax"]["why"]


def test_cli_info_json(capsys):
    assert cli.main(["info", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["python"].count(".") == 2 and "ops" in data


def test_cli_usage(capsys):
    assert cli.main([]) == 2
    assert "info" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        cli.main(["nonsense"])
    assert e.value.code == 2


def test_dim_errors_name_the_argument():
    assert normalize_dim("dim", -1, 3) == 2 and normalize_dim("dim", 0, 0) == 0
    with pytest.raises(IndexError, match=r"dim: expected a dimension in \[-3, 2\] for a 3-D input, got 3"):
        normalize_dim("dim", 3, 3)
    with pytest.raises(TypeError, match="dim: expected an int"):
        normalize_dim("dim", 1.0, 3)


def test_require_fp8(monkeypatch):
    require_fp8()  # this torch has float8
    monkeypatch.delattr(torch, "float8_e4m3fn")
    with pytest.raises(RuntimeError, match="float8_e4m3fn"):
        require_fp8()


def test_missing_triton_kernel_refuses_to_launch():
    stub = backend._MissingTriton("ImportError: no triton")

    @stub.jit
    def k(x):
        pass

    with pytest.raises(RuntimeError, match="needs Triton"):
        k[(1,)](1)
