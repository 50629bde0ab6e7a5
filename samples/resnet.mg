// ResNet-18 for 32x32 images (CIFAR-10's shape), as He et al., "Deep
// Residual Learning for Image Recognition", 2016, with the usual CIFAR stem
// (one 3x3 convolution, no max pool): four stages of two basic blocks with
// 64, 128, 256 and 512 channels, each stage after the first halving the
// image with a stride-2 block whose shortcut is a 1x1 convolution; batch
// normalisation after every convolution; global average pooling and a
// linear head. The blocks `basic` (identity shortcut) and `down` (stride 2,
// projection shortcut) serve every stage through their constant parameters:
// the widths and image sizes come from their arguments' types and the
// calls. 11,173,962 trained parameters at the default sizes, as
// torchvision's resnet18 with this stem and 10 classes.
//
// Tiny setting for tests: -D B=8 -D W=4 -D HW=16 (widths 4 to 32, 16x16
// images, 2x2 in the last stage; with fewer images or pixels per batch the
// last batch norms see only a handful of values and amplify rounding).
//   mgc run samples/resnet.mg -D B=8 -D W=4 -D HW=16 --steps 5 --int-range y=10
const B = 128, W = 64, HW = 32, K = 10

// Convolution (no bias) then batch normalisation, as torchvision's
// conv + bn pairs; weights by kaiming_normal (fan_out, as torchvision).
block conv_bn(x: f32[B, CIN, H, H], const CIN, const H, const COUT,
              const KS = 3, const STRIDE = 1) {
  param w: f32[COUT, CIN, KS, KS] = kaiming_normal(mode = fan_out)
  param gamma: f32[COUT] = ones
  param beta: f32[COUT] = zeros
  buffer running_mean: f32[COUT] = zeros
  buffer running_var: f32[COUT] = ones
  return batch_norm(conv2d(x, w, stride = STRIDE, padding = (KS - 1) / 2),
                    gamma, beta, running_mean, running_var)
}

// The basic block: two 3x3 conv + bn, the input added before the last
// ReLU (the identity shortcut).
block basic(x: f32[B, C, H, H], const C, const H) {
  h = relu(conv_bn(x, COUT = C) as conv1)
  return relu(conv_bn(h, COUT = C) as conv2 + x)
}

// The first block of a later stage: stride 2 and COUT channels, so the
// shortcut is a strided 1x1 conv + bn (torchvision's `downsample`).
block down(x: f32[B, CIN, H, H], const CIN, const H, const COUT) {
  h = relu(conv_bn(x, COUT = COUT, STRIDE = 2) as conv1)
  h = conv_bn(h, COUT = COUT) as conv2
  return relu(h + conv_bn(x, COUT = COUT, KS = 1, STRIDE = 2) as downsample)
}

model resnet18 {
  input x: f32[B, 3, HW, HW]
  input y: i32[B]
  // Instances named as torchvision's modules (layer1_0 for layer1.0).
  h = relu(conv_bn(x, COUT = W) as stem)
  h = basic(h) as layer1_0                // stage 1: W channels, HW x HW
  h = basic(h) as layer1_1
  h = down(h, COUT = 2 * W) as layer2_0   // stage 2: 2W channels, HW/2 x HW/2
  h = basic(h) as layer2_1
  h = down(h, COUT = 4 * W) as layer3_0   // stage 3
  h = basic(h) as layer3_1
  h = down(h, COUT = 8 * W) as layer4_0   // stage 4: 8W channels, HW/8 x HW/8
  h = basic(h) as layer4_1
  param w_fc: f32[8 * W, K] = kaiming_uniform(a = sqrt(5))  // nn.Linear's
  param b_fc: f32[K] = uniform(-1 / sqrt(8 * W), 1 / sqrt(8 * W))
  output logits = global_avg_pool(h) @ w_fc + b_fc
  loss = cross_entropy(logits, y)
}

train {
  optimizer = sgd(lr = 0.1, momentum = 0.9, weight_decay = 5e-4)
  schedule = cosine
  steps = 20000
}
