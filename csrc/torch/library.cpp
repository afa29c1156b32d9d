// The tinycuda op library and the _C module stub. Each family declares its
// schemas next to its kernels (TORCH_LIBRARY_FRAGMENT in csrc/torch/<family>.cpp);
// fake (meta) kernels and autograd live in tinycuda/ops/<family>.py.
#include <Python.h>
#include <torch/library.h>

TORCH_LIBRARY(tinycuda, m) {}

// `import tinycuda._C` loads this library, which runs the registrations.
static PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", "tinycuda kernels (torch ops)", -1,
                                 nullptr};
PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&module_def); }
