// A model must have at least one output.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
// CHECK: {{.*}}no_outputs.mg:[[@LINE+1]]:7: error: model 'm' has no outputs (declare them with 'output NAME = ...' or 'loss = ...')
model m {
  input x: f32[8]
  y = relu(x)
}
