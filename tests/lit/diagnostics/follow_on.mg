// One cause, one error: a value whose expression failed is not reported
// again as an unknown name where it is used (in a later statement, in an
// output that names it), and a model whose output statement failed to parse
// is not also told it has no outputs.
// RUN: not mgc compile %s 2>&1 | FileCheck %s
// RUN: not mgc compile %S/Inputs/missing_paren.mg 2>&1 | FileCheck %s --check-prefix=PAREN
model m {
  input x: f32[4]
  // CHECK: follow_on.mg:[[@LINE+1]]:7: error: unknown function 'foo'
  y = foo(x)
  z = y * 2
  // CHECK: follow_on.mg:[[@LINE+1]]:14: error: unknown function 'bar'
  output w = bar(z + y)
  loss = mean(w)
}
// CHECK-NOT: unknown name
// CHECK-NOT: error

// PAREN: missing_paren.mg:4:1: error: expected ')' to close the argument list, got '}'
// PAREN: missing_paren.mg:3:14: note: the '(' it would close is here
// PAREN-NOT: no outputs
