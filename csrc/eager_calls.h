// The Python methods of fastpad._C (csrc/eager_calls.cpp): the public functions' eager calls of conv and
// conv_transpose.
#pragma once

#include <Python.h>

namespace fastpad {

// The module's method table, ended by a null entry.
PyMethodDef* eager_call_methods();

}  // namespace fastpad
