// Built only without CUDA: every CUDA entry point of the core exists and
// reports TC_ERR_NO_CUDA, so callers (the torch layer, libtinycuda) link the
// same way in both configurations.
#include "cross_entropy.h"
#include "gelu.h"
#include "glu.h"
#include "layer_norm.h"
#include "linear.h"
#include "relu.h"
#include "rms_norm.h"
#include "scale_bias_relu.h"
#include "softmax.h"
#include "square.h"
#include "sum.h"
#include "internal.h"

#define TC_NO_CUDA(fn, params)                                                    \
  tc_status fn(const params*) {                                                    \
    return tc_fail(TC_ERR_NO_CUDA, "%s: no CUDA device: tinycuda was built without CUDA", #fn);    \
  }

TC_NO_CUDA(tc_gelu_cuda, tc_gelu_params)
TC_NO_CUDA(tc_gelu_backward_cuda, tc_gelu_backward_params)
TC_NO_CUDA(tc_glu_cuda, tc_glu_params)
TC_NO_CUDA(tc_glu_backward_cuda, tc_glu_backward_params)
TC_NO_CUDA(tc_cross_entropy_cuda, tc_cross_entropy_params)
TC_NO_CUDA(tc_cross_entropy_backward_cuda, tc_cross_entropy_backward_params)
TC_NO_CUDA(tc_layer_norm_cuda, tc_layer_norm_params)
TC_NO_CUDA(tc_layer_norm_backward_cuda, tc_layer_norm_backward_params)
TC_NO_CUDA(tc_linear_cuda, tc_linear_params)
TC_NO_CUDA(tc_linear_backward_cuda, tc_linear_backward_params)
TC_NO_CUDA(tc_relu_cuda, tc_relu_params)
TC_NO_CUDA(tc_relu_backward_cuda, tc_relu_backward_params)
TC_NO_CUDA(tc_relu_mask_cuda, tc_relu_mask_params)
TC_NO_CUDA(tc_relu_mask_backward_cuda, tc_relu_mask_backward_params)
TC_NO_CUDA(tc_rms_norm_cuda, tc_rms_norm_params)
TC_NO_CUDA(tc_rms_norm_backward_cuda, tc_rms_norm_backward_params)
TC_NO_CUDA(tc_scale_bias_relu_cuda, tc_scale_bias_relu_params)
TC_NO_CUDA(tc_scale_bias_relu_backward_cuda, tc_scale_bias_relu_backward_params)
TC_NO_CUDA(tc_softmax_cuda, tc_softmax_params)
TC_NO_CUDA(tc_softmax_backward_cuda, tc_softmax_backward_params)
TC_NO_CUDA(tc_square_cuda, tc_square_params)
TC_NO_CUDA(tc_square_backward_cuda, tc_square_backward_params)
TC_NO_CUDA(tc_sum_cuda, tc_sum_params)
TC_NO_CUDA(tc_sum_backward_cuda, tc_sum_backward_params)
