// A file needs a model, and only one.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
// CHECK: {{.*}}no_model.mg:1:1: error: the file has no model (model NAME { ... })
const D = 8
block f(x: f32[D]) -> f32[D] {
  return x
}
