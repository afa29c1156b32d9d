// Every tinycuda op's schema, in one place. Kernels are registered per family
// in csrc/torch/<family>.cpp; fake (meta) kernels and autograd in
// tinycuda/ops/<family>.py.
#include <Python.h>
#include <torch/library.h>

TORCH_LIBRARY(tinycuda, m) {
  // gelu
  m.def("gelu(Tensor x, str approximate='none') -> Tensor");
  m.def("gelu_backward(Tensor grad_out, Tensor x, str approximate='none') -> Tensor");
  // glu: swiglu, geglu
  m.def("swiglu(Tensor a, Tensor b) -> Tensor");
  m.def("swiglu_backward(Tensor grad_out, Tensor a, Tensor b) -> (Tensor, Tensor)");
  m.def("geglu(Tensor a, Tensor b, str approximate='tanh') -> Tensor");
  m.def("geglu_backward(Tensor grad_out, Tensor a, Tensor b, str approximate='tanh') -> (Tensor, Tensor)");
  // cross_entropy (fused_linear_cross_entropy: torch layer over its core)
  m.def("cross_entropy(Tensor logits, Tensor target, int ignore_index=-100, str reduction='mean', "
        "float label_smoothing=0.0, bool compute_grad=False) -> (Tensor loss, Tensor grad_logits)");
  m.def("cross_entropy_backward(Tensor(a!) grad_logits, Tensor grad_loss) -> ()");
  m.def("fused_linear_cross_entropy(Tensor hidden, Tensor weight, Tensor target, Tensor? bias=None, "
        "int ignore_index=-100, str reduction='mean', float label_smoothing=0.0, "
        "bool compute_grad=False, int chunk_size=0) -> (Tensor loss, Tensor grad_hidden, "
        "Tensor grad_weight, Tensor grad_bias)");
  // layer_norm: (y, mean, rstd); statistics float32 (float64 for float64 x), one per row
  m.def("layer_norm(Tensor x, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
        "float eps=1e-05) -> (Tensor, Tensor, Tensor)");
  m.def("layer_norm_backward(Tensor grad_out, Tensor x, int[] normalized_shape, Tensor mean, "
        "Tensor rstd, Tensor? weight, bool[3] output_mask) -> (Tensor, Tensor, Tensor)");
  // linear
  m.def("linear(Tensor x, Tensor weight, Tensor? bias=None, *, int algo=0) -> Tensor");
  m.def("linear_backward(Tensor grad_out, Tensor x, Tensor weight, bool[3] output_mask, *, "
        "int algo=0) -> (Tensor, Tensor, Tensor)");
  // relu
  m.def("relu(Tensor x) -> Tensor");
  m.def("relu_backward(Tensor grad_out, Tensor x) -> Tensor");
  m.def("relu_mask(Tensor x) -> (Tensor, Tensor)");
  m.def("relu_mask_backward(Tensor grad_out, Tensor mask) -> Tensor");
  // rms_norm: (y, rstd)
  m.def("rms_norm(Tensor x, int[] normalized_shape, Tensor? weight=None, float? eps=None) "
        "-> (Tensor, Tensor)");
  m.def("rms_norm_backward(Tensor grad_out, Tensor x, int[] normalized_shape, Tensor rstd, "
        "Tensor? weight, bool[2] output_mask) -> (Tensor, Tensor)");
  // scale_bias_relu
  m.def("scale_bias_relu(Tensor x, Tensor bias, float scale) -> Tensor");
  m.def("scale_bias_relu_backward(Tensor grad_out, Tensor out, float scale, bool[2] output_mask)"
        " -> (Tensor, Tensor)");
  // softmax
  m.def("softmax(Tensor x, int dim=-1, *, int algo=0) -> Tensor");
  m.def("log_softmax(Tensor x, int dim=-1, *, int algo=0) -> Tensor");
  m.def("softmax_backward(Tensor grad_out, Tensor out, int dim, bool log) -> Tensor");
  // square
  m.def("square(Tensor x) -> Tensor");
  m.def("square_backward(Tensor grad_out, Tensor x) -> Tensor");
  // sum
  m.def("sum(Tensor x, int? dim=None, bool keepdim=False) -> Tensor");
  m.def("sum_backward(Tensor grad_out, SymInt[] input_shape, int? dim, bool keepdim) -> Tensor");
}

// `import tinycuda._C` loads this library, which runs the registrations above.
static PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", "tinycuda kernels (torch ops)", -1,
                                 nullptr};
PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&module_def); }
