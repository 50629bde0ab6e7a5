// A small convolutional classifier for scikit-learn's 8x8 handwritten digits
// (1797 images, 10 classes): two 3x3 convolutions, a 2x2 max pool, a third
// convolution, global average pooling and a linear head. Each convolution's
// weights are drawn as PyTorch's kaiming_normal_ (std sqrt(2 / fan_in),
// fan_in = input channels x 3 x 3). Trained in tests/lit/run/digits.test to
// at least 95% held-out accuracy.
//
//   python3 tests/lit/run/Inputs/digits_npy.py /tmp/digits
//   mgc run samples/digits_cnn.mg --data x=/tmp/digits/train_x.npy \
//     --data y=/tmp/digits/train_y.npy --save digits.ckpt
//   mgc eval samples/digits_cnn.mg --resume digits.ckpt \
//     --data x=/tmp/digits/test_x.npy --data y=/tmp/digits/test_y.npy
const B = 40, C1 = 16, C2 = 32, K = 10

model digits_cnn {
  input x: f32[B, 1, 8, 8]
  input y: i32[B]                          // the digit, 0..9
  param w1: f32[C1, 1, 3, 3] = normal(0, 0.4714)   // sqrt(2 / 9)
  param b1: f32[C1, 1, 1] = zeros
  param w2: f32[C2, C1, 3, 3] = normal(0, 0.1179)  // sqrt(2 / 144)
  param b2: f32[C2, 1, 1] = zeros
  param w3: f32[C2, C2, 3, 3] = normal(0, 0.0833)  // sqrt(2 / 288)
  param b3: f32[C2, 1, 1] = zeros
  param w_out: f32[C2, K] = normal(0, 0.1768)      // sqrt(1 / 32)
  param b_out: f32[K] = zeros
  h = relu(conv2d(x, w1, padding = 1) + b1)        // [B, C1, 8, 8]
  h = relu(conv2d(h, w2, padding = 1) + b2)        // [B, C2, 8, 8]
  h = max_pool2d(h, 2)                             // [B, C2, 4, 4]
  h = relu(conv2d(h, w3, padding = 1) + b3)        // [B, C2, 4, 4]
  output logits = global_avg_pool(h) @ w_out + b_out
  loss = cross_entropy(logits, y)
}

train {
  optimizer = adamw(lr = 3e-3, weight_decay = 0.0)
  steps = 600
  seed = 0
}
