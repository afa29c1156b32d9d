// Plain Python functions of the tinycuda._C module, for the few facts of the
// core that a family's Python side needs and no torch op should carry (they
// are not tensors). A family adds one with a static PythonMethod beside its
// torch layer; library.cpp builds the module's method table from the list.
#pragma once
#include <Python.h>

#include <vector>

namespace tc_torch {
std::vector<PyMethodDef>& python_methods();

struct PythonMethod {
  explicit PythonMethod(PyMethodDef def) { python_methods().push_back(def); }
};
}  // namespace tc_torch
