// The tinycuda op library and the _C module stub. Each family declares its
// schemas next to its kernels (TORCH_LIBRARY_FRAGMENT in csrc/torch/<family>.cpp);
// fake (meta) kernels and autograd live in tinycuda/ops/<family>.py.
#include <Python.h>
#include <torch/library.h>

#include "python_methods.h"

TORCH_LIBRARY(tinycuda, m) {}

// `import tinycuda._C` loads this library, which runs the registrations; its
// Python functions are those the families added (python_methods.h).
std::vector<PyMethodDef>& tc_torch::python_methods() {
  static std::vector<PyMethodDef> methods;
  return methods;
}

// Named as the build names it: _C (setup.py), tinycuda_C (the JIT build of tinycuda/_loader.py).
#define TC_STRING(x) TC_STRING_(x)
#define TC_STRING_(x) #x
#define TC_PYINIT(name) TC_PYINIT_(name)
#define TC_PYINIT_(name) PyInit_##name
static PyModuleDef module_def = {PyModuleDef_HEAD_INIT, TC_STRING(TORCH_EXTENSION_NAME),
                                 "tinycuda kernels (torch ops)", -1, nullptr};

PyMODINIT_FUNC TC_PYINIT(TORCH_EXTENSION_NAME)(void) {
  static std::vector<PyMethodDef> table = [] {
    std::vector<PyMethodDef> t = tc_torch::python_methods();
    t.push_back({nullptr, nullptr, 0, nullptr});
    return t;
  }();
  module_def.m_methods = table.data();
  return PyModule_Create(&module_def);
}
