"""A Triton helper (an ``@triton.jit`` function called from another one) must not give a string
parameter a default: triton 3.6, the Triton of torch 2.11 and of our H200, hands the default over
as a plain str, and the calling kernel fails to compile on the GPU ("'str' object has no attribute
'type'"), while the interpreter and later Tritons accept it. It broke the blocked LU, the batch_norm
rows and (in ``matvec._load_as``) the fp8 and MoE row kernels, each time with every CPU test green.
A kernel's own defaults are bound by the launcher and are fine. This reads the source, so it holds
whichever Triton the suite runs with."""
import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "fastpath"


def _is_jit(dec) -> bool:
    node = dec.func if isinstance(dec, ast.Call) else dec
    return isinstance(node, ast.Attribute) and node.attr == "jit" or isinstance(node, ast.Name) and node.id == "jit"


def _jit_functions():
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and any(_is_jit(d) for d in node.decorator_list):
                yield path, node


def _called_names(fn: ast.FunctionDef) -> set:
    names = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            f = node.func
            names.add(f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None)
    return names


def _string_defaults(fn: ast.FunctionDef) -> list:
    args = fn.args.args[len(fn.args.args) - len(fn.args.defaults):]
    return [a.arg for a, d in zip(args, fn.args.defaults) if isinstance(d, ast.Constant) and isinstance(d.value, str)]


def test_helpers_have_no_string_defaults():
    fns = list(_jit_functions())
    assert len(fns) > 100, f"expected the library's Triton functions, found {len(fns)}"
    called = set().union(*(_called_names(fn) for _, fn in fns))
    bad = [f"{path.relative_to(SRC)}:{fn.lineno} {fn.name}({', '.join(names)})"
           for path, fn in fns if fn.name in called and (names := _string_defaults(fn))]
    assert not bad, "jit helpers with a default string argument (pass it at every call instead): " + "; ".join(bad)


def test_the_check_sees_a_helper_default():
    """The scan itself: a helper with a string default, called from a kernel, is found."""
    src = ("@triton.jit\ndef helper(x, EV: tl.constexpr = ''):\n    return x\n"
           "@triton.jit\ndef kernel(p):\n    helper(p)\n")
    fns = [n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.FunctionDef)]
    called = set().union(*(_called_names(f) for f in fns))
    assert [f.name for f in fns if f.name in called and _string_defaults(f)] == ["helper"]
