"""``fastpath bench-decode`` with tuning knobs set first (A/B of prefill and decode tok/s, one
process per setting):

    python scripts/knob_decode.py "fp8.scaled_mm.W8_DEQUANT_FROM=128" -- --config llama-3-8b --fp8 --random-weights

Knobs as in ``knob_ab.py``'s variants (``module.ATTR=value``, ``;``-separated, modules under
``fastpath.ops`` or full dotted paths, values Python literals); the records name them too.
"""
import shlex
import sys

from knob_ab import parse

from fastpath.cli import main
from fastpath.engine import commands

if __name__ == "__main__":
    sets, _, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    for mod, attr, value in parse(f"knobs:{sets}")[1]:
        setattr(mod, attr, value)
    plain = commands.command_line
    commands.command_line = lambda args: f"python scripts/knob_decode.py {shlex.quote(sets)} -- {plain(args)}"
    sys.exit(main(["bench-decode", *rest]))
