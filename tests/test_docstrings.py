"""The ``>>>`` examples of fastpath's docstrings run as doctests: each must run as written and
print what the docstring says it prints (results written by hand in the docs). They run in a
child process without Triton's interpreter, as a CPU user would run them (the ops' reference
paths; the kernels have their own tests), and on the GPU where there is one (the examples pick
``"cuda"`` when it is available). Lines that need a user's checkpoint carry ``+SKIP``."""
from tests.conftest import run_as_user

_RUNNER = r"""
import doctest, importlib, pkgutil, sys
import fastpath
finder = doctest.DocTestFinder()
runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
names, failed = [], []
for info in pkgutil.walk_packages(fastpath.__path__, "fastpath."):
    if info.name.endswith("__main__"):  # importing it runs the command line
        continue
    module = importlib.import_module(info.name)
    for test in finder.find(module):
        if not test.examples:  # (the finder leaves out objects a module imports)
            continue
        before = runner.failures
        runner.run(test, out=sys.__stdout__.write)
        names.append(test.name)
        if runner.failures > before:
            failed.append(test.name)
print("RAN", len(names), "FAILED", failed)
"""


def test_docstring_examples_run_and_print_what_they_say():
    proc = run_as_user(_RUNNER)
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    assert proc.returncode == 0 and last.startswith("RAN"), proc.stdout[-4000:] + proc.stderr[-4000:]
    ran = int(last.split()[1])
    assert ran >= 50, f"only {ran} docstrings with examples found: the module walk missed some\n{proc.stdout[-2000:]}"
    assert last.endswith("FAILED []"), proc.stdout[-8000:]
