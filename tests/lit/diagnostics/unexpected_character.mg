// Characters that are not part of the language, and malformed numbers.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
model m {
  input x: f32[8]
  // CHECK: {{.*}}unexpected_character.mg:[[@LINE+1]]:16: error: unexpected character '$'
  output y = x $ x
  // CHECK: {{.*}}unexpected_character.mg:[[@LINE+1]]:18: error: malformed number '2abc'
  output z = x * 2abc
}
