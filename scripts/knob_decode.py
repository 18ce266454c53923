"""``fastpath bench-decode`` with tuning knobs set first (A/B of prefill and decode tok/s, one
process per setting):

    python scripts/knob_decode.py "fp8.scaled_mm.W8_DEQUANT_FROM=128" -- --config llama-3-8b --fp8 --random-weights

Knobs as ``module.ATTR=value`` under ``fastpath.ops`` (values Python literals), ``;``-separated.
"""
import ast
import importlib
import shlex
import sys

from fastpath.cli import main

if __name__ == "__main__":
    sets, _, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    for a in filter(None, sets.split(";")):
        target, _, value = a.partition("=")
        mod_name, _, attr = target.rpartition(".")
        importlib.import_module(f"fastpath.ops.{mod_name}")
        mod = sys.modules[f"fastpath.ops.{mod_name}"]  # (not the package's attribute: a function may shadow it)
        if not hasattr(mod, attr):
            raise SystemExit(f"{target}: {mod.__name__} has no {attr}")
        setattr(mod, attr, ast.literal_eval(value))
    from fastpath.engine import commands
    plain = commands.command_line  # the records name the knobs too
    commands.command_line = lambda args: f"python scripts/knob_decode.py {shlex.quote(sets)} -- {plain(args)}"
    sys.exit(main(["bench-decode", *rest]))
