"""One helper that turns an op implementation into a ``torch.library`` custom op.

``torch.compile(fullgraph=True)`` traces the registered op (it is opaque to the compiler,
with a fake implementation for shapes), and autograd goes through it when a backward is
registered. Eager calls skip the dispatcher, which costs tens of microseconds per call on
the decode path, and call the implementation directly.
"""
from __future__ import annotations

import functools
from typing import Callable

import torch

NAMESPACE = "fastpath"


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _through_op(args, has_backward: bool) -> bool:
    """Whether a call must go through the registered op: a tensor subclass among the
    arguments (fake and functional tensors while torch.compile or AOT autograd traces, e.g. a
    backward that calls another registered op), or, for an op with a backward, a tensor that
    requires grad with grad mode on. One plain loop (generator expressions cost more per
    argument than the checks on a slow host)."""
    grad = has_backward and torch.is_grad_enabled()
    for a in args:
        if isinstance(a, torch.Tensor) and (type(a) not in _PLAIN or (grad and a.requires_grad)):
            return True
    return False


def register_op(name: str, *, fake: Callable, backward: Callable | None = None,
                setup_context: Callable | None = None, mutates_args=()):
    """Decorate ``impl(*args) -> Tensor`` (fully type-annotated, positional arguments).

    Returns a callable with the same signature that calls ``impl`` directly in eager mode
    and ``torch.ops.fastpath.<name>`` while compiling or when autograd must record it.
    The registered op is available as ``.op``.
    """

    def decorate(impl: Callable) -> Callable:
        op = torch.library.custom_op(f"{NAMESPACE}::{name}", impl, mutates_args=mutates_args)
        op.register_fake(fake)
        if backward is not None:
            op.register_autograd(backward, setup_context=setup_context)

        @functools.wraps(impl)
        def call(*args):
            if torch.compiler.is_compiling() or _through_op(args, backward is not None):
                return op(*args)
            return impl(*args)

        call.op = op
        return call

    return decorate
