"""Which kernels a CANN stack launches for each aten operator, with their
cost from the real shapes and dtypes, and output shapes for operators that
have no meta kernel in torch 1.13.

A rule maps (args, kwargs, inputs, outputs) to a list of Launch tuples.
Names are Ascend op types as msprof and the profiling-suite guide show
them; the core type follows where the op runs on an Ascend 910-class
device (cube ops on AI_CORE, vector ops on AI_VECTOR, a few data-dependent
ones on AI_CPU).
"""

import collections
import math

import torch

from .. import AI_CORE, AI_VECTOR, AI_CPU

Launch = collections.namedtuple("Launch", "name type flops bytes")

# Ops that only change metadata (views, aliases, allocation): no kernel.
NO_KERNEL = frozenset("""
    view _unsafe_view _reshape_alias reshape t transpose permute expand
    expand_as squeeze unsqueeze as_strided slice select split
    split_with_sizes unsafe_split chunk unbind alias detach lift_fresh
    lift empty empty_like empty_strided new_empty new_empty_strided resize
    set diagonal narrow unfold view_as_real view_as_complex _conj _neg_view
    sym_size sym_stride sym_numel is_same_size _has_compatible_shallow_copy_type
    stride size numel dim movedim swapaxes _unsafe_split
    _record_function_enter _record_function_exit _record_function_enter_new
    """.split())

# Elementwise ops: aten base name -> (kernel, core type, flops/element).
# Layout-agnostic: they run on whatever format their inputs are in.
ELEMENTWISE = {
    "add": ("Add", AI_VECTOR, 1), "sub": ("Sub", AI_VECTOR, 1),
    "rsub": ("Sub", AI_VECTOR, 1), "mul": ("Mul", AI_VECTOR, 1),
    "div": ("RealDiv", AI_VECTOR, 1), "neg": ("Neg", AI_VECTOR, 1),
    "abs": ("Abs", AI_VECTOR, 1), "exp": ("Exp", AI_VECTOR, 4),
    "log": ("Log", AI_VECTOR, 4), "sqrt": ("Sqrt", AI_VECTOR, 2),
    "rsqrt": ("Rsqrt", AI_VECTOR, 2), "reciprocal": ("Reciprocal",
                                                     AI_VECTOR, 2),
    "pow": ("Pow", AI_VECTOR, 4), "relu": ("Relu", AI_VECTOR, 1),
    "gelu": ("Gelu", AI_VECTOR, 8), "silu": ("Swish", AI_VECTOR, 5),
    "sigmoid": ("Sigmoid", AI_VECTOR, 4), "tanh": ("Tanh", AI_VECTOR, 5),
    "hardtanh": ("ClipByValue", AI_VECTOR, 2),
    "clamp": ("ClipByValue", AI_VECTOR, 2),
    "clamp_min": ("Maximum", AI_VECTOR, 1),
    "clamp_max": ("Minimum", AI_VECTOR, 1),
    "maximum": ("Maximum", AI_VECTOR, 1), "minimum": ("Minimum", AI_VECTOR, 1),
    "where": ("Select", AI_VECTOR, 1), "masked_fill": ("MaskedFill",
                                                      AI_VECTOR, 1),
    "eq": ("Equal", AI_VECTOR, 1), "ne": ("NotEqual", AI_VECTOR, 1),
    "lt": ("Less", AI_VECTOR, 1), "le": ("LessEqual", AI_VECTOR, 1),
    "gt": ("Greater", AI_VECTOR, 1), "ge": ("GreaterEqual", AI_VECTOR, 1),
    "logical_not": ("LogicalNot", AI_VECTOR, 1),
    "logical_and": ("LogicalAnd", AI_VECTOR, 1),
    "logical_or": ("LogicalOr", AI_VECTOR, 1),
    "bitwise_and": ("BitwiseAnd", AI_VECTOR, 1),
    "bitwise_or": ("BitwiseOr", AI_VECTOR, 1),
    "sign": ("Sign", AI_VECTOR, 1), "floor": ("Floor", AI_VECTOR, 1),
    "ceil": ("Ceil", AI_VECTOR, 1), "round": ("Round", AI_VECTOR, 1),
    "erf": ("Erf", AI_VECTOR, 6), "sin": ("Sin", AI_VECTOR, 6),
    "cos": ("Cos", AI_VECTOR, 6), "addcmul": ("Addcmul", AI_VECTOR, 3),
    "addcdiv": ("Addcdiv", AI_VECTOR, 3), "lerp": ("Lerp", AI_VECTOR, 3),
    "threshold_backward": ("ReluGrad", AI_VECTOR, 1),
    "gelu_backward": ("GeluGrad", AI_VECTOR, 10),
    "sigmoid_backward": ("SigmoidGrad", AI_VECTOR, 3),
    "tanh_backward": ("TanhGrad", AI_VECTOR, 3),
    "silu_backward": ("SwishGrad", AI_VECTOR, 6),
    "hardtanh_backward": ("HardtanhGrad", AI_VECTOR, 2),
    "leaky_relu": ("LeakyRelu", AI_VECTOR, 2),
    "leaky_relu_backward": ("LeakyReluGrad", AI_VECTOR, 2),
    "zero": ("ZerosLike", AI_VECTOR, 0), "zeros": ("ZerosLike", AI_VECTOR, 0),
    "zeros_like": ("ZerosLike", AI_VECTOR, 0),
    "new_zeros": ("ZerosLike", AI_VECTOR, 0),
    "fill": ("Fill", AI_VECTOR, 0), "ones": ("Fill", AI_VECTOR, 0),
    "ones_like": ("OnesLike", AI_VECTOR, 0), "new_ones": ("Fill", AI_VECTOR, 0),
    "full": ("Fill", AI_VECTOR, 0), "full_like": ("Fill", AI_VECTOR, 0),
    "new_full": ("Fill", AI_VECTOR, 0),
    "native_dropout_backward": ("DropOutDoMask", AI_VECTOR, 1),
    "tril": ("Tril", AI_VECTOR, 0), "triu": ("Triu", AI_VECTOR, 0),
}

# Scalar-operand variants Ascend names apart.
SCALAR_KERNEL = {"Add": "Adds", "Mul": "Muls", "RealDiv": "Muls",
                 "Sub": "Adds", "Maximum": "Maximum", "Pow": "Pows"}

# Other ops with a fixed kernel: base name -> (kernel, type, flops/elem).
SIMPLE = {
    "_softmax": ("SoftmaxV2", AI_VECTOR, 5),
    "_softmax_backward_data": ("SoftmaxGrad", AI_VECTOR, 4),
    "_log_softmax": ("LogSoftmaxV2", AI_VECTOR, 6),
    "_log_softmax_backward_data": ("LogSoftmaxGrad", AI_VECTOR, 5),
    "nll_loss_forward": ("NLLLoss", AI_VECTOR, 1),
    "nll_loss_backward": ("NLLLossGrad", AI_VECTOR, 1),
    "nll_loss2d_forward": ("NLLLoss", AI_VECTOR, 1),
    "nll_loss2d_backward": ("NLLLossGrad", AI_VECTOR, 1),
    "mse_loss": ("MseLoss", AI_VECTOR, 3),
    "mse_loss_backward": ("MseLossGrad", AI_VECTOR, 3),
    "binary_cross_entropy_with_logits": (
        "SigmoidCrossEntropyWithLogitsV2", AI_VECTOR, 8),
    "native_layer_norm": ("LayerNorm", AI_VECTOR, 8),
    "native_layer_norm_backward": ("LayerNormGrad", AI_VECTOR, 12),
    "native_group_norm": ("GroupNorm", AI_VECTOR, 8),
    "native_group_norm_backward": ("GroupNormGrad", AI_VECTOR, 12),
    "sum": ("ReduceSum", AI_VECTOR, 1), "mean": ("ReduceMean", AI_VECTOR, 1),
    "amax": ("ReduceMax", AI_VECTOR, 1), "amin": ("ReduceMin", AI_VECTOR, 1),
    "prod": ("ReduceProd", AI_VECTOR, 1), "all": ("ReduceAll", AI_VECTOR, 1),
    "any": ("ReduceAny", AI_VECTOR, 1), "argmax": ("ArgMaxV2", AI_VECTOR, 1),
    "argmin": ("ArgMin", AI_VECTOR, 1),
    "var": ("ReduceStdV2", AI_VECTOR, 3), "std": ("ReduceStdV2", AI_VECTOR, 3),
    "var_mean": ("ReduceStdV2", AI_VECTOR, 3),
    "std_mean": ("ReduceStdV2", AI_VECTOR, 3),
    "norm": ("LpNormV2", AI_VECTOR, 2),
    "linalg_vector_norm": ("LpNormV2", AI_VECTOR, 2),
    "cat": ("ConcatD", AI_VECTOR, 0), "stack": ("ConcatD", AI_VECTOR, 0),
    "embedding": ("GatherV2", AI_VECTOR, 0),
    "index_select": ("GatherV2", AI_VECTOR, 0),
    "embedding_dense_backward": ("EmbeddingDenseGrad", AI_VECTOR, 1),
    "gather": ("GatherElements", AI_VECTOR, 0),
    "scatter": ("ScatterElements", AI_VECTOR, 0),
    "scatter_add": ("ScatterAddWithAxis", AI_VECTOR, 1),
    "index": ("Index", AI_VECTOR, 0), "index_put": ("IndexPutV2", AI_VECTOR, 0),
    "index_add": ("IndexAdd", AI_VECTOR, 1),
    "topk": ("TopKV2", AI_VECTOR, 4), "sort": ("Sort", AI_VECTOR, 8),
    "cumsum": ("Cumsum", AI_VECTOR, 1), "flip": ("ReverseV2", AI_VECTOR, 0),
    "roll": ("Roll", AI_VECTOR, 0), "constant_pad_nd": ("PadV3", AI_VECTOR, 0),
    "upsample_nearest2d": ("ResizeNearestNeighborV2", AI_VECTOR, 1),
    "upsample_bilinear2d": ("ResizeBilinearV2", AI_VECTOR, 8),
    "upsample_nearest2d_backward": ("ResizeNearestNeighborV2Grad",
                                    AI_VECTOR, 1),
    "upsample_bilinear2d_backward": ("ResizeBilinearV2Grad", AI_VECTOR, 8),
    "max_pool2d_with_indices": ("MaxPoolWithArgmaxV1", AI_VECTOR, 9),
    "max_pool2d_with_indices_backward": ("MaxPoolGradWithArgmaxV1",
                                         AI_VECTOR, 9),
    "avg_pool2d": ("AvgPoolV2", AI_VECTOR, 9),
    "avg_pool2d_backward": ("AvgPoolV2Grad", AI_VECTOR, 9),
    "_adaptive_avg_pool2d": ("AdaptiveAvgPool2d", AI_VECTOR, 1),
    "_adaptive_avg_pool2d_backward": ("AdaptiveAvgPool2dGrad", AI_VECTOR, 1),
    "arange": ("Range", AI_VECTOR, 1),
    "bernoulli": ("StatelessBernoulli", AI_VECTOR, 4),
    "normal": ("StatelessRandomNormalV2", AI_VECTOR, 8),
    "randn": ("StatelessRandomNormalV2", AI_VECTOR, 8),
    "uniform": ("StatelessRandomUniformV2", AI_VECTOR, 4),
    "rand": ("StatelessRandomUniformV2", AI_VECTOR, 4),
    "randint": ("StatelessRandomUniformV2", AI_VECTOR, 4),
    "randperm": ("RandpermV2", AI_CPU, 8),
    "nonzero": ("NonZero", AI_CPU, 1), "masked_select": ("MaskedSelect",
                                                         AI_CPU, 1),
    "unique": ("UniqueWithCountsAndSorting", AI_CPU, 8),
    "_unique2": ("UniqueWithCountsAndSorting", AI_CPU, 8),
    "multinomial": ("Multinomial", AI_CPU, 8),
    "max": ("ArgMaxWithValue", AI_VECTOR, 1),
    "min": ("ArgMinWithValue", AI_VECTOR, 1),
}

# Ops that work on the 5HD layout natively (the CANN conv-net formats).
NATIVE_5HD = frozenset("""
    convolution convolution_backward native_batch_norm
    native_batch_norm_backward max_pool2d_with_indices
    max_pool2d_with_indices_backward avg_pool2d avg_pool2d_backward
    _adaptive_avg_pool2d _adaptive_avg_pool2d_backward
    """.split())


def nbytes(t):
    return t.numel() * t.element_size()


def _numel(ts):
    return max((t.numel() for t in ts), default=0)


def _io(ins, outs):
    return float(sum(nbytes(t) for t in ins) + sum(nbytes(t) for t in outs))


def _has_scalar(args):
    return any(isinstance(a, (int, float, bool)) and not
               isinstance(a, torch.Tensor) for a in args[1:2])


def _conv_name(weight, transposed, groups, cin):
    spatial = weight.dim() - 2
    if transposed:
        return "Conv3DTranspose" if spatial == 3 else "Conv2DTranspose"
    if spatial == 3:
        return "Conv3D"
    if groups > 1 and groups == cin:
        return "DepthwiseConv2D"
    return "Conv2D"


def _conv_flops(weight, out_numel, transposed, in_numel):
    # Each output (input, when transposed) element is a dot product over
    # Cin/groups x kernel.
    k = weight.shape[1] * math.prod(weight.shape[2:])
    return 2.0 * (in_numel if transposed else out_numel) * k


def _convolution(args, kwargs, ins, outs):
    x, w = args[0], args[1]
    bias = args[2] if len(args) > 2 else None
    transposed = bool(args[6]) if len(args) > 6 else False
    groups = int(args[8]) if len(args) > 8 else 1
    out = outs[0]
    name = _conv_name(w, transposed, groups, x.shape[1])
    b = nbytes(x) + nbytes(w) + nbytes(out)
    if isinstance(bias, torch.Tensor):
        b += nbytes(bias)
    return [Launch(name, AI_CORE, _conv_flops(w, out.numel(), transposed,
                                              x.numel()), float(b))]


def _convolution_backward(args, kwargs, ins, outs):
    gy, x, w = args[0], args[1], args[2]
    transposed = bool(args[7]) if len(args) > 7 else False
    groups = int(args[9]) if len(args) > 9 else 1
    mask = args[10] if len(args) > 10 else (True, True, True)
    fwd = _conv_name(w, transposed, groups, x.shape[1])
    flops = _conv_flops(w, gy.numel(), transposed, x.numel())
    out = []
    if mask[0]:
        out.append(Launch(fwd + "BackpropInput", AI_CORE, flops,
                          float(nbytes(gy) + nbytes(w) + nbytes(x))))
    if mask[1]:
        out.append(Launch(fwd + "BackpropFilter", AI_CORE, flops,
                          float(nbytes(gy) + nbytes(x) + nbytes(w))))
    if len(mask) > 2 and mask[2]:
        out.append(Launch("BiasAddGrad", AI_VECTOR, float(gy.numel()),
                          float(nbytes(gy) + w.shape[0] * gy.element_size())))
    return out


def _matmul_flops(a, b, batch=1):
    return 2.0 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1]


def _mm(args, kwargs, ins, outs):
    return [Launch("MatMul", AI_CORE, _matmul_flops(args[0], args[1]),
                   _io(ins, outs))]


def _addmm(args, kwargs, ins, outs):
    return [Launch("MatMul", AI_CORE, _matmul_flops(args[1], args[2]),
                   _io(ins, outs))]


def _bmm(args, kwargs, ins, outs):
    a, b = args[0], args[1]
    return [Launch("BatchMatMul", AI_CORE,
                   _matmul_flops(a, b, a.shape[0]), _io(ins, outs))]


def _baddbmm(args, kwargs, ins, outs):
    a, b = args[1], args[2]
    return [Launch("BatchMatMul", AI_CORE,
                   _matmul_flops(a, b, a.shape[0]), _io(ins, outs))]


def _mv(args, kwargs, ins, outs):
    a = args[0]
    return [Launch("MatMul", AI_CORE, 2.0 * a.numel(), _io(ins, outs))]


def _batch_norm(args, kwargs, ins, outs):
    x, y = args[0], outs[0]
    training = bool(args[5]) if len(args) > 5 else False
    if not training:
        return [Launch("BNInfer", AI_VECTOR, 2.0 * x.numel(),
                       float(nbytes(x) + nbytes(y)))]
    # Statistics pass, then normalise-and-update pass (running stats).
    return [Launch("BNTrainingReduce", AI_VECTOR, 2.0 * x.numel(),
                   float(nbytes(x))),
            Launch("BNTrainingUpdate", AI_VECTOR, 4.0 * x.numel(),
                   float(nbytes(x) + nbytes(y)))]


def _batch_norm_backward(args, kwargs, ins, outs):
    gy, x = args[0], args[1]
    training = bool(args[7]) if len(args) > 7 else True
    if not training:
        return [Launch("BNInferGrad", AI_VECTOR, 2.0 * x.numel(),
                       float(2 * nbytes(gy)))]
    return [Launch("BNTrainingUpdateGrad", AI_VECTOR, 4.0 * x.numel(),
                   float(nbytes(gy) + nbytes(x))),
            Launch("BNTrainingReduceGrad", AI_VECTOR, 5.0 * x.numel(),
                   float(nbytes(gy) + 2 * nbytes(x)))]


def _native_dropout(args, kwargs, ins, outs):
    x = args[0]
    train = args[2] if len(args) > 2 else kwargs.get("train", True)
    if train is False:
        return [Launch("TensorMove", AI_VECTOR, 0.0, float(2 * nbytes(x)))]
    mask_bytes = x.numel() / 8.0
    return [Launch("DropOutGenMaskV3", AI_VECTOR, 4.0 * x.numel(),
                   mask_bytes),
            Launch("DropOutDoMask", AI_VECTOR, float(x.numel()),
                   2.0 * nbytes(x) + mask_bytes)]


def _clone(args, kwargs, ins, outs):
    x = args[0]
    # contiguous() of a transposed view is a Transpose on the device.
    name = "TensorMove" if x.is_contiguous() else "Transpose"
    return [Launch(name, AI_VECTOR, 0.0, _io(ins, outs))]


def _copy(args, kwargs, ins, outs):
    dst, src = args[0], args[1]
    if dst.dtype != src.dtype:
        name = "Cast"
    elif not dst.is_contiguous() or not src.is_contiguous():
        name = "ViewCopy"
    else:
        name = "TensorMove"
    return [Launch(name, AI_VECTOR, float(dst.numel()),
                   float(nbytes(dst) + nbytes(src)))]


def _cast(args, kwargs, ins, outs):
    return [Launch("Cast", AI_VECTOR, float(outs[0].numel()),
                   _io(ins[:1], outs))]


RULES = {
    "convolution": _convolution,
    "convolution_overrideable": _convolution,
    "convolution_backward": _convolution_backward,
    "convolution_backward_overrideable": _convolution_backward,
    "mm": _mm, "addmm": _addmm, "bmm": _bmm, "baddbmm": _baddbmm,
    "mv": _mv, "native_batch_norm": _batch_norm,
    "native_batch_norm_backward": _batch_norm_backward,
    "native_dropout": _native_dropout, "clone": _clone, "copy": _copy,
    "_to_copy": _cast,
}


def camel(name):
    return "".join(p[:1].upper() + p[1:] for p in name.split("_") if p)


def kernels(base, args, kwargs, ins, outs):
    """The launches of one aten op on the device; (launches, mapped)."""
    rule = RULES.get(base)
    if rule is not None:
        return rule(args, kwargs, ins, outs), True
    spec = ELEMENTWISE.get(base)
    mapped = spec is not None
    if spec is None:
        spec = SIMPLE.get(base)
        mapped = spec is not None
    if spec is None:
        spec = (camel(base), AI_VECTOR, 1)
    name, ktype, per = spec
    if base in ELEMENTWISE and _has_scalar(args):
        name = SCALAR_KERNEL.get(name, name)
    n = max(_numel(outs), _numel(ins))
    return [Launch(name, ktype, float(per * n), _io(ins, outs))], mapped


# ---------------------------------------------------------------------------
# Output shapes for ops without a meta kernel in torch 1.13.

def _meta_like(t):
    return torch.empty_like(t, device="meta")


def _shape_convolution_backward(args, kwargs):
    gy, x, w = args[0], args[1], args[2]
    bias_sizes = args[3]
    mask = args[10] if len(args) > 10 else kwargs.get("output_mask",
                                                      (True, True, True))
    gx = _meta_like(x) if mask[0] else None
    gw = _meta_like(w) if mask[1] else None
    gb = None
    if mask[2]:
        sizes = list(bias_sizes) if bias_sizes is not None else [w.shape[0]]
        gb = torch.empty(sizes, dtype=gy.dtype, device="meta")
    return (gx, gw, gb)


def _shape_like_input(args, kwargs):
    # Backward ops whose grad_input has the forward input's shape:
    # (grad_output, self, ...).
    return _meta_like(args[1])


def _shape_embedding_dense_backward(args, kwargs):
    gy, num_weights = args[0], int(args[2])
    return torch.empty((num_weights, gy.shape[-1]), dtype=gy.dtype,
                       device="meta")


SHAPES = {
    "convolution_backward": _shape_convolution_backward,
    "convolution_backward_overrideable": _shape_convolution_backward,
    "max_pool2d_with_indices_backward": _shape_like_input,
    "avg_pool2d_backward": _shape_like_input,
    "_adaptive_avg_pool2d_backward": _shape_like_input,
    "embedding_dense_backward": _shape_embedding_dense_backward,
}


def derive_shapes(base, func, args, kwargs):
    """Outputs of an op the meta backend cannot run, or None when no rule
    knows them."""
    rule = SHAPES.get(base)
    if rule is not None:
        return rule(args, kwargs)
    # A *_backward op returning one tensor shaped like its "self"/"input".
    schema = func._schema
    if base.endswith("_backward") and len(schema.returns) == 1:
        for i, a in enumerate(schema.arguments):
            if a.name in ("self", "input") and i < len(args) and \
                    isinstance(args[i], torch.Tensor):
                return _meta_like(args[i])
    return None
