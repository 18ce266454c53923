"""The ``conv`` op family: convolutions without padded copies.

* :mod:`.conv3d`: ``causal_conv3d`` (video VAEs: causal in time, cache of the previous
  chunk's frames in place of the temporal zeros) on one implicit-GEMM ``tl.dot`` kernel.
* :mod:`.conv1d`: ``causal_conv1d`` / ``causal_conv1d_update`` (depthwise causal conv1d
  with a rolling state: LFM2, Qwen3.5 GatedDeltaNet), ``short_conv`` (LFM2's gated
  ``c * conv(b * x)`` in one launch) and ``conv1d`` (``F.conv1d``
  semantics; depthwise and dense Triton paths).
"""
from .._core.backend import triton_reason
from .conv1d import (causal_conv1d, causal_conv1d_update, conv1d, reference_causal_conv1d, reference_conv1d,
                     reference_short_conv, short_conv)
from .conv3d import causal_conv3d, reference_causal_conv3d

__all__ = ["causal_conv3d", "causal_conv1d", "causal_conv1d_update", "conv1d", "reference_causal_conv3d",
           "reference_causal_conv1d", "reference_conv1d", "short_conv", "reference_short_conv"]

FAMILY = {"name": "conv", "ops": ["causal_conv3d", "causal_conv1d", "causal_conv1d_update", "short_conv", "conv1d"],
          "reason": triton_reason}
