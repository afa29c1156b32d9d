/* elementwise family: the unary math and activation functions, y = f(x),
 * and the binary arithmetic ops with broadcasting, one machinery for all.
 *
 *   sigmoid      1 / (1 + e^-x)                    f' = y (1 - y)
 *   tanh         tanh x                            f' = 1 - y^2
 *   silu         x sigmoid(x)                      f' = s (1 + x (1 - s)), s = sigmoid(x)
 *   mish         x tanh(softplus(x))               f' = t + x s (1 - t^2), t = tanh(softplus(x))
 *   leaky_relu   x > 0 ? x : a x                   f' = x > 0 ? 1 : a          (a: negative_slope)
 *   elu          x > 0 ? x : a (e^x - 1)           f' = x > 0 ? 1 : a e^x      (a: alpha)
 *   selu         l elu(x; a0)                      l, a0 torch's constants
 *   softplus     log(1 + e^(b x)) / b,  x if b x > t    f' = sigmoid(b x), 1 if b x > t
 *   softsign     x / (1 + |x|)                     f' = 1 / (1 + |x|)^2
 *   hardsigmoid  clamp(x / 6 + 1/2, 0, 1)          f' = 1/6 inside (-3, 3), else 0
 *   hardtanh     clamp(x, lo, hi)                  f' = 1 inside (lo, hi), else 0
 *   clamp        clamp(x, lo, hi)                  f' = 1 inside [lo, hi], else 0 (torch's inclusive rule)
 *   exp, log, abs, neg, sqrt, rsqrt                f' = y, 1/x, sign x, -1, 1/(2y), -y^3/2
 * NaN propagates through every op, as in torch (clamp and hardtanh keep it).
 *
 * The op list is declared once, here: tc_unary_op, and tc_unary_schema(op)
 * gives each op's name, arguments and defaults as a torch schema
 * ("leaky_relu(Tensor x, float negative_slope=0.01) -> Tensor"). Both doors
 * build their functions from it: the torch layer defines the schemas (and
 * "<name>_backward(Tensor grad_out, Tensor x|y, <the same scalars>)"), the
 * C ABI's Python side reads names and defaults from it. An op's float
 * arguments travel in alpha, beta in schema order; clamp's missing bound is
 * -inf / +inf.
 *
 * Forward: x is any strided view (element strides, 0 for a broadcast dim) of
 * `ndim` <= 8 dims of `sizes`; y is contiguous in those sizes. Backward: all
 * buffers contiguous, n elements; `saved` is the forward's output y where
 * tc_unary_backward_reads_output(op) (sigmoid, tanh, exp, sqrt, rsqrt:
 * cheaper), else its input x. Computed in float32 (float64 for double).
 *
 * The binary ops, out = f(a, b), broadcast as torch broadcasts:
 *   add   a + alpha b      d/da = 1, d/db = alpha
 *   sub   a - alpha b      d/da = 1, d/db = -alpha
 *   mul   a b              b, a
 *   div   a / b            1/b, -a/b^2
 *   maximum, minimum       NaN propagates; the gradient goes to the larger
 *                          (smaller) operand, halved between equal ones (torch's rule)
 *   pow   a^b              b a^(b-1) (0 where b = 0), a^b log a (0 where a = 0 and b >= 0)
 * a and b are strided views of the output's shape (a broadcast dim has
 * stride 0), or a host scalar where the pointer is NULL; out is contiguous.
 * The backward writes each wanted gradient at the output's shape,
 * grad_a = grad_out * d/da; the caller sums it over a's broadcast dims.
 *
 * where: out = condition ? a : b, broadcast over all three; condition is a
 * bool array (one byte per element, 0 or 1) of any strides, a and b as a
 * binary op's. Its gradient is where again: grad_a = where(condition,
 * grad_out, 0), grad_b = where(condition, 0, grad_out), so it has no backward
 * entry point. */
#ifndef TINYCUDA_ELEMENTWISE_H
#define TINYCUDA_ELEMENTWISE_H
#include "common.h"

typedef enum {
  TC_UNARY_SIGMOID = 0,
  TC_UNARY_TANH = 1,
  TC_UNARY_SILU = 2,
  TC_UNARY_MISH = 3,
  TC_UNARY_LEAKY_RELU = 4,
  TC_UNARY_ELU = 5,
  TC_UNARY_SELU = 6,
  TC_UNARY_SOFTPLUS = 7,
  TC_UNARY_SOFTSIGN = 8,
  TC_UNARY_HARDSIGMOID = 9,
  TC_UNARY_HARDTANH = 10,
  TC_UNARY_CLAMP = 11,
  TC_UNARY_EXP = 12,
  TC_UNARY_LOG = 13,
  TC_UNARY_ABS = 14,
  TC_UNARY_NEG = 15,
  TC_UNARY_SQRT = 16,
  TC_UNARY_RSQRT = 17,
  TC_UNARY_COUNT = 18
} tc_unary_op;

typedef struct {
  tc_dtype dtype;
  tc_unary_op op;
  double alpha, beta;   /* the op's float arguments, in schema order */
  int ndim;             /* 0 (one element) to 8 */
  int64_t sizes[8];     /* y's shape */
  int64_t x_strides[8]; /* in elements; any sign or 0 */
  const void* x;
  void* y;              /* contiguous */
  void* stream;         /* cudaStream_t; ignored on the CPU */
} tc_unary_params;

typedef struct {
  tc_dtype dtype;
  tc_unary_op op;
  double alpha, beta;
  int64_t n;
  const void* grad_y;
  const void* saved; /* y if tc_unary_backward_reads_output(op), else x */
  void* grad_x;
  void* stream;
} tc_unary_backward_params;

typedef enum {
  TC_BINARY_ADD = 0,
  TC_BINARY_SUB = 1,
  TC_BINARY_MUL = 2,
  TC_BINARY_DIV = 3,
  TC_BINARY_MAXIMUM = 4,
  TC_BINARY_MINIMUM = 5,
  TC_BINARY_POW = 6,
  TC_BINARY_COUNT = 7
} tc_binary_op;

typedef struct {
  tc_dtype dtype;
  tc_binary_op op;
  double alpha;          /* add, sub: out = a +- alpha b; unused by the others */
  int ndim;              /* 0 to 8 */
  int64_t sizes[8];      /* out's shape, the broadcast of a's and b's */
  int64_t a_strides[8];  /* in elements; 0 along a broadcast dim */
  int64_t b_strides[8];
  const void* a;         /* NULL: a is a_scalar */
  const void* b;         /* NULL: b is b_scalar */
  double a_scalar, b_scalar;
  void* out;             /* contiguous */
  void* stream;
} tc_binary_params;

typedef struct {
  tc_dtype dtype;
  tc_binary_op op;
  double alpha;
  int ndim;
  int64_t sizes[8];
  int64_t a_strides[8];
  int64_t b_strides[8];
  const void* a;
  const void* b;
  double a_scalar, b_scalar;
  const void* grad_out;  /* contiguous in sizes */
  void* grad_a;          /* contiguous in sizes; NULL: not wanted */
  void* grad_b;
  void* stream;
} tc_binary_backward_params;

typedef struct {
  tc_dtype dtype;                /* a's, b's and out's */
  int ndim;                      /* 0 to 8 */
  int64_t sizes[8];              /* out's shape, the broadcast of all three */
  int64_t condition_strides[8];  /* in elements; 0 along a broadcast dim */
  int64_t a_strides[8];
  int64_t b_strides[8];
  const void* condition;         /* bool: one byte, 0 or 1 */
  const void* a;                 /* NULL: a is a_scalar */
  const void* b;                 /* NULL: b is b_scalar */
  double a_scalar, b_scalar;
  void* out;                     /* contiguous */
  void* stream;
} tc_where_params;

/* The op's torch schema (name, arguments, defaults); NULL for an unknown op. */
TC_API const char* tc_unary_schema(int op);
/* 1 if the op's backward reads the forward's output, 0 if its input, -1 for an unknown op. */
TC_API int tc_unary_backward_reads_output(int op);

/* The binary op's torch schema; NULL for an unknown op. */
TC_API const char* tc_binary_schema(int op);
/* 1 if the op's partial along operand `which` (0: a, 1: b) is a constant,
 * written to *c (add: 1 and alpha; sub: 1 and -alpha): its gradient is then
 * c * grad_out, which needs no kernel and no operand (and none at all where
 * c is 1). 0 otherwise, -1 for an unknown op. */
TC_API int tc_binary_constant_partial(int op, int which, double alpha, double* c);

TC_API tc_status tc_unary_cpu(const tc_unary_params* p);
TC_API tc_status tc_unary_cuda(const tc_unary_params* p);
TC_API tc_status tc_unary_backward_cpu(const tc_unary_backward_params* p);
TC_API tc_status tc_unary_backward_cuda(const tc_unary_backward_params* p);
TC_API tc_status tc_binary_cpu(const tc_binary_params* p);
TC_API tc_status tc_binary_cuda(const tc_binary_params* p);
TC_API tc_status tc_binary_backward_cpu(const tc_binary_backward_params* p);
TC_API tc_status tc_binary_backward_cuda(const tc_binary_backward_params* p);
TC_API tc_status tc_where_cpu(const tc_where_params* p);
TC_API tc_status tc_where_cuda(const tc_where_params* p);

#endif
