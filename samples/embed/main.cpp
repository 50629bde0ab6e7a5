// Trains the MLP sample on a synthetic task through the mgc executor
// library: the labels come from a fixed random "teacher" network computed
// here, so the task is learnable; the student is measured on batches it never
// trained on.
//
//   embed MODEL.mg [STEPS]
#include <mgc/Session.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int kBatch = 32, kIn = 8, kHidden = 32, kClasses = 4;

// A fixed two-layer teacher: labels = argmax(tanh(x W1) W2), weights drawn
// from N(0, 0.3^2) with a fixed seed.
struct Teacher {
  std::vector<float> w1, w2;
  explicit Teacher(uint32_t seed) : w1(kIn * 16), w2(16 * kClasses) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.3f);
    for (float &w : w1)
      w = normal(rng);
    for (float &w : w2)
      w = normal(rng);
  }
  int32_t label(const float *x) const {
    float h[16];
    for (int j = 0; j < 16; ++j) {
      float s = 0;
      for (int i = 0; i < kIn; ++i)
        s += x[i] * w1[i * 16 + j];
      h[j] = std::tanh(s);
    }
    int best = 0;
    float bestScore = -1e30f;
    for (int c = 0; c < kClasses; ++c) {
      float s = 0;
      for (int j = 0; j < 16; ++j)
        s += h[j] * w2[j * kClasses + c];
      if (s > bestScore) {
        bestScore = s;
        best = c;
      }
    }
    return best;
  }
};

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> y;
};

Batch makeBatch(const Teacher &teacher, std::mt19937 &rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Batch b{std::vector<float>(kBatch * kIn), std::vector<int32_t>(kBatch)};
  for (float &v : b.x)
    v = uniform(rng);
  for (int i = 0; i < kBatch; ++i)
    b.y[i] = teacher.label(&b.x[i * kIn]);
  return b;
}

bool check(const mgc::Status &status) {
  if (!status)
    std::fprintf(stderr, "%s\n", status.message().c_str());
  return status.isOk();
}

bool feed(mgc::Session &session, const Batch &b) {
  return check(
             session.feed("x", mgc::Tensor::fromFloats({kBatch, kIn}, b.x))) &&
         check(session.feed("y", mgc::Tensor::fromInts({kBatch}, b.y)));
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: embed MODEL.mg [STEPS]\n");
    return 2;
  }
  int steps = argc > 2 ? std::atoi(argv[2]) : 1000;
  if (steps < 21) {
    std::fprintf(stderr, "embed: STEPS must be more than 20\n");
    return 2;
  }

  mgc::SessionOptions options;
  options.defines = {{"B", std::to_string(kBatch)},
                     {"D", std::to_string(kIn)},
                     {"H", std::to_string(kHidden)},
                     {"C", std::to_string(kClasses)}};
  // AdamW with a short warm-up and a cosine decay over the run.
  options.train = {{"lr", "0.01"},
                   {"weight_decay", "0"},
                   {"schedule", "cosine"},
                   {"warmup_steps", "20"},
                   {"steps", std::to_string(steps)}};
  options.seed = 1;
  auto session = mgc::Session::create(argv[1], options);
  if (!session) {
    std::fprintf(stderr, "%s\n", session.status().message().c_str());
    return 1;
  }
  mgc::Session &s = **session;

  Teacher teacher(2024);
  std::mt19937 trainRng(1), testRng(2);
  for (int i = 0; i < steps; ++i) {
    if (!feed(s, makeBatch(teacher, trainRng)))
      return 1;
    auto result = s.step();
    if (!result) {
      std::fprintf(stderr, "%s\n", result.status().message().c_str());
      return 1;
    }
    if (result->step % 100 == 0 || result->step == 1)
      std::printf("step %lld loss %.4f lr %.3g\n",
                  static_cast<long long>(result->step), result->loss,
                  result->metrics["lr"]);
  }

  // Held-out accuracy through the forward program.
  int correct = 0, total = 0;
  for (int k = 0; k < 16; ++k) {
    Batch b = makeBatch(teacher, testRng);
    if (!feed(s, b))
      return 1;
    auto out = s.forward();
    if (!out) {
      std::fprintf(stderr, "%s\n", out.status().message().c_str());
      return 1;
    }
    std::vector<float> logits = out->at("logits").toFloats();
    for (int i = 0; i < kBatch; ++i) {
      int best = 0;
      for (int c = 1; c < kClasses; ++c)
        if (logits[i * kClasses + c] > logits[i * kClasses + best])
          best = c;
      correct += best == b.y[i];
      ++total;
    }
  }
  std::printf("held-out accuracy %.3f (%d of %d)\n",
              static_cast<double>(correct) / total, correct, total);
  return 0;
}
