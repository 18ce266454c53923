"""``fastpath.info()``: versions, the GPU, and which path each op family takes here and why."""
from __future__ import annotations

import importlib
import platform

import torch

from ._core import backend


def info(device: str | torch.device | None = None, *, file=None) -> dict:
    """Report this machine's versions, GPU and the path each op family takes.

    Parameters
    ----------
    device : the device to report paths for (default: ``cuda`` if available, else ``cpu``).
    file : where to print the report (default stdout); ``file=False`` prints nothing.

    Returns
    -------
    dict with keys ``python``, ``torch``, ``triton``, ``gpu`` (None or name, capability,
    memory_gib, sms), ``device``, ``interpret``, ``pdl`` (None when the decode-path kernels
    use programmatic dependent launch, else why not) and ``ops`` (family -> {"path", "why",
    "ops"}).
    """
    from .ops import FAMILY_MODULES

    dev = torch.device(device) if device is not None else backend.default_device()
    gpu = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        gpu = {"name": props.name, "capability": f"{props.major}.{props.minor}",
               "memory_gib": round(props.total_memory / 2**30, 1), "sms": props.multi_processor_count}
    report = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": backend.TRITON_VERSION or f"unavailable ({backend.TRITON_ERROR})",
        "gpu": gpu,
        "device": str(dev),
        "interpret": backend.INTERPRET,
        "pdl": backend.pdl_reason(dev),
        "ops": {},
    }
    for mod_name in FAMILY_MODULES:
        fam = importlib.import_module(f".ops.{mod_name}", __package__).FAMILY
        why = fam["reason"](dev)
        report["ops"][fam["name"]] = {
            "path": "triton" if why is None else "reference",
            "why": why or ("Triton interpreter on the CPU" if backend.INTERPRET else "Triton kernels compile for this GPU"),
            "ops": fam["ops"],
        }
    if file is not False:
        print(format_info(report), file=file)
    return report


def format_info(r: dict) -> str:
    lines = [f"fastpath      {_version()}",
             f"python        {r['python']}",
             f"torch         {r['torch']}",
             f"triton        {r['triton']}"]
    g = r["gpu"]
    lines.append("gpu           " + (f"{g['name']} (capability {g['capability']}, {g['memory_gib']} GiB, "
                                      f"{g['sms']} SMs)" if g else "none"))
    lines.append(f"device        {r['device']}" + ("  (TRITON_INTERPRET=1)" if r["interpret"] else ""))
    pdl = r.get("pdl")
    lines.append("launch        " + ("decode kernels overlap the one before them (programmatic dependent launch, "
                                      f"FASTPATH_PDL={backend.PDL})" if pdl is None else f"plain ({pdl})"))
    lines.append("op family     path       why")
    for name, o in r["ops"].items():
        lines.append(f"{name:<13} {o['path']:<10} {o['why']}  [{', '.join(o['ops'])}]")
    return "\n".join(lines)


def _version() -> str:
    from . import __version__
    return __version__
