"""Op classes for the roofline model, from the op type a captured graph stores
(``aten.addmm.default``). Torch-free, so graphs loaded from files can be costed without torch."""

from __future__ import annotations

# The class picks a roofline efficiency (placer.cost.roofline.OP_CLASSES); names are aten op names.
_MATMUL = {"mm", "addmm", "bmm", "baddbmm", "matmul", "_scaled_mm", "linear"}
_CONV = {"convolution", "convolution_backward", "_convolution", "cudnn_convolution", "_slow_conv2d_forward",
         "convolution_overrideable", "mkldnn_convolution"}
_ATTENTION = {"_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward",
              "_scaled_dot_product_efficient_attention", "_scaled_dot_product_efficient_attention_backward",
              "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward",
              "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward"}
_REDUCTION = {"sum", "mean", "amax", "amin", "max", "min", "var", "var_mean", "std", "norm", "linalg_vector_norm",
              "_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data",
              "native_batch_norm", "native_batch_norm_backward", "_native_batch_norm_legit",
              "_native_batch_norm_legit_functional", "native_layer_norm", "native_layer_norm_backward",
              "nll_loss_forward", "nll_loss_backward", "nll_loss2d_forward", "nll_loss2d_backward",
              "avg_pool2d", "avg_pool2d_backward", "max_pool2d_with_indices", "max_pool2d_with_indices_backward",
              "_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward", "adaptive_avg_pool2d", "argmax", "logsumexp",
              "cumsum", "prod", "any", "all"}
_MOVEMENT = {"cat", "stack", "clone", "copy_", "copy", "_to_copy", "index", "index_select", "embedding",
             "embedding_dense_backward", "gather", "scatter", "scatter_add", "index_put", "index_add",
             "_unsafe_index", "_unsafe_index_put", "constant_pad_nd", "repeat", "slice_scatter", "select_scatter",
             "as_strided_scatter", "new_zeros", "zeros", "zeros_like", "ones_like", "full", "full_like", "empty",
             "empty_like", "fill", "masked_fill", "where", "tril", "triu", "arange", "new_empty_strided", "ones"}
OP_CLASS_NAMES = ("matmul", "conv", "attention", "reduction", "movement", "elementwise", "source")


def op_class(op_type: str) -> str:
    """The roofline class of an op type as stored in a graph (``aten.addmm.default`` or ``addmm``)."""
    if op_type in ("parameter", "buffer", "input", "constant"):
        return "source"
    base = op_type.split(".")[1] if op_type.startswith("aten.") else op_type
    base = base.rstrip("_") if base not in ("copy_",) else base
    if base in _MATMUL:
        return "matmul"
    if base in _CONV:
        return "conv"
    if base in _ATTENTION:
        return "attention"
    if base in _REDUCTION:
        return "reduction"
    if base in _MOVEMENT:
        return "movement"
    return "elementwise"
