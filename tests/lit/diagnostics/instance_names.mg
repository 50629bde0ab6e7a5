// Bad instance names: taken twice in a scope (with a note at the first),
// on a call that is not a block's, on a repeated call, missing.
// RUN: not mgc compile %s 2>&1 | FileCheck %s
const B = 2, D = 4
block lin(x: f32[B, D]) {
  param w: f32[D, D] = normal(0, 0.1)
  return x @ w
}
model bad {
  input x: f32[B, D]
  h = lin(x) as stem
  // CHECK: instance_names.mg:[[@LINE+2]]:17: error: the instance name 'stem' is already used in this scope
  // CHECK: instance_names.mg:[[@LINE-2]]:17: note: 'stem' is first used here
  h = lin(h) as stem
  // CHECK: instance_names.mg:[[@LINE+1]]:18: error: 'as act' names a block instance, and 'relu' is not a block
  h = relu(h) as act
  // CHECK: instance_names.mg:[[@LINE+1]]:35: error: the copies of a repeat are named by it (blocks.0, blocks.1, ...): drop 'as foo'
  h = repeat 2 blocks { lin(h) as foo }
  // CHECK: instance_names.mg:[[@LINE+1]]:16: error: the copies of this repeat need a name of their own: 'stem' is already used
  h = repeat 2 stem { lin(h) }
  output y = h
}
