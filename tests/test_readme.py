"""The README's Python examples run as written (the blocks that need a user's checkpoint or
pipeline excepted: they name ``/path/to``, ``from_pretrained`` or ``pipe``), in one child process
without Triton's interpreter, as a user would paste them (on the CPU here: the examples pick
``"cuda"`` when it is available); and its bad-input examples raise the error type and message
they show."""
import os
import re

from tests.conftest import run_as_user

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NEEDS_USER_FILES = ("/path/to", "from_pretrained", "pipe.")


def _blocks():
    with open(os.path.join(_ROOT, "README.md")) as f:
        return re.findall(r"^```python\n(.*?)^```", f.read(), flags=re.S | re.M)


def test_readme_examples_run():
    runnable = [b for b in _blocks() if not b.startswith(">>>") and not any(s in b for s in _NEEDS_USER_FILES)]
    assert len(runnable) >= 3, f"expected the softmax/linear/FP8, MoE and attention blocks, found {len(runnable)}"
    proc = run_as_user("\n".join(runnable) + "\nprint('README EXAMPLES DONE')")
    assert proc.returncode == 0 and "README EXAMPLES DONE" in proc.stdout, proc.stderr[-4000:]


def test_readme_error_examples_raise_what_they_show():
    shown = [pair for b in _blocks() if b.startswith(">>>")
             for pair in re.findall(r"^>>> (.+)\n(\w+): (.+)$", b, flags=re.M)]
    assert len(shown) >= 2, shown
    checks = ["import torch, fastpath"]
    for expr, kind, message in shown:
        checks.append(f"try:\n    {expr}\nexcept {kind} as e:\n"
                      f"    assert str(e) == {message!r}, (str(e), {message!r})\n"
                      f"else:\n    raise AssertionError('no {kind} from ' + {expr!r})")
    proc = run_as_user("\n".join(checks) + "\nprint('ERRORS AS SHOWN')")
    assert proc.returncode == 0 and "ERRORS AS SHOWN" in proc.stdout, proc.stderr[-4000:]
