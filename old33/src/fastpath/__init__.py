"""fastpath: Triton kernels for PyTorch, with a PyTorch reference path on every device.

Importing fastpath never launches GPU work and works without Triton or a GPU.
"""
from . import nn, streams
from .streams import timed
from .ops.dropout import dropout, reference_dropout
from .ops.batch_norm import batch_norm, reference_batch_norm
from .ops.loss import mse_loss, reference_mse_loss
from .ops.bincount import bincount, reference_bincount
from .ops import linalg
from .info import info
from .nn import FP8Linear, quantize_
from .ops.attention import reference_scaled_dot_product_attention, scaled_dot_product_attention
from .ops.elementwise import eq, frexp, ge, gt, heaviside, le, logspace, lt, maximum, minimum, ne, take
from .ops.grouped_mm import grouped_mm, reference_grouped_mm
from .ops.moe import fused_experts, quantize_experts, reference_fused_experts, reference_route, route, router
from .ops.fp8 import ScalingType, quantize_fp8, reference_quantize_fp8, reference_scaled_mm, scaled_mm
from .ops.linear import linear, reference_linear
from .ops.sampling import reference_sample, sample
from .ops.softmax import log_softmax, reference_softmax, softmax
from .ops.norm import reference_rms_norm, rms_norm
from .ops.gated_delta import (chunk_gated_delta_rule, gated_delta_rule_step, recurrent_gated_delta_rule,
                              reference_gated_delta_rule)
from .ops.pad import pad, reference_pad
from .ops.channel_norm import channel_rms_norm, reference_channel_rms_norm
from .ops.conv import (causal_conv1d, causal_conv1d_update, causal_conv3d, conv1d, reference_causal_conv1d,
                       reference_causal_conv3d, reference_conv1d, reference_short_conv, short_conv)

__version__ = "0.1.0"
__all__ = ["info", "softmax", "log_softmax", "sample", "linear", "quantize_fp8", "scaled_mm",
           "ScalingType", "FP8Linear", "quantize_", "nn", "linalg", "reference_softmax", "reference_sample",
           "reference_linear", "reference_quantize_fp8", "reference_scaled_mm", "grouped_mm", "route", "router",
           "fused_experts", "quantize_experts", "reference_grouped_mm", "reference_route",
           "reference_fused_experts", "scaled_dot_product_attention",
           "reference_scaled_dot_product_attention", "frexp", "heaviside", "take", "logspace", "eq", "ne", "lt",
           "le", "gt", "ge", "minimum", "maximum", "rms_norm", "reference_rms_norm", "gated_delta_rule_step",
           "chunk_gated_delta_rule", "recurrent_gated_delta_rule", "reference_gated_delta_rule", "pad",
           "reference_pad", "causal_conv3d", "causal_conv1d", "causal_conv1d_update", "conv1d",
           "reference_causal_conv3d", "reference_causal_conv1d", "reference_conv1d", "short_conv",
           "reference_short_conv", "streams", "timed", "dropout",
           "reference_dropout", "batch_norm", "reference_batch_norm", "mse_loss", "reference_mse_loss",
           "bincount", "reference_bincount", "channel_rms_norm", "reference_channel_rms_norm", "__version__"]
