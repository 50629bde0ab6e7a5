// The executor library (include/mgc/Session.h): sessions from model files
// and executables, feeding, training steps against the interpreter, forward
// runs, parameters, checkpoints with exact resume, and learning a teacher
// task.
#include "SessionTestSupport.h"
#include "SourcePath.h"

#include "backend/Executable.h"
#include "frontend/Frontend.h"
#include "ir/Interpreter.h"
#include "runtime/Checkpoint.h"
#include "runtime/session/Pipeline.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace mgc {
namespace {

using namespace session_test;

bool sameBytes(const Tensor &a, const Tensor &b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         a.nbytes() == b.nbytes() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

ir::HostTensor toHost(const Tensor &t) {
  ir::HostTensor h(
      ir::TensorType(static_cast<ir::DType>(t.dtype()), t.shape()));
  std::vector<float> f = t.toFloats();
  for (size_t i = 0; i < f.size(); ++i)
    h.data[i] = f[i];
  return h;
}

void checkClose(double got, double want, const std::string &what) {
  INFO(what << ": got " << got << ", want " << want);
  CHECK(std::fabs(got - want) <= 1e-4 * std::max(1.0, std::fabs(want)));
}

TEST_CASE("Session: a model file gives inputs, parameters and a step") {
  SessionOptions o;
  o.defines = mlpDefines();
  auto s = makeSession(sample("mlp.mg"), o);
  std::vector<TensorInfo> in = s->inputs();
  REQUIRE(in.size() == 2);
  CHECK(in[0].name == "x");
  CHECK(in[0].shape == std::vector<int64_t>({8, 12}));
  CHECK(in[1].dtype == DType::I32);
  std::vector<TensorInfo> params = s->parameters();
  REQUIRE(params.size() == 6);
  CHECK(params[0].name == "w1");
  CHECK(s->stepCount() == 0);
  feedBatch(*s, 0, 4);
  auto r = s->step();
  REQUIRE(r);
  CHECK(r->step == 1);
  CHECK(s->stepCount() == 1);
  CHECK(std::isfinite(r->loss));
  CHECK(r->metrics.count("lr") == 1);
  CHECK(r->metrics.count("grad_norm") == 1);
  CHECK(r->metrics.at("lr") == doctest::Approx(1e-3)); // the file's lr
}

TEST_CASE("Session: errors come back as a Status") {
  SessionOptions o;
  o.defines = mlpDefines();
  auto missing = Session::create("/nonexistent/model.mg", o);
  CHECK(!missing);
  CHECK(missing.status().message().find("model.mg") != std::string::npos);

  o.train = {{"lr", "fast"}};
  auto badValue = Session::create(sample("mlp.mg"), o);
  REQUIRE(!badValue);
  CHECK(badValue.status().message().find("'lr'") != std::string::npos);

  o.train = {{"learning_rate", "0.1"}};
  auto unknown = Session::create(sample("mlp.mg"), o);
  REQUIRE(!unknown);
  CHECK(unknown.status().message().find("learning_rate") != std::string::npos);

  o.train = {{"momentum", "0.9"}}; // the file says adamw
  auto wrong = Session::create(sample("mlp.mg"), o);
  REQUIRE(!wrong);
  CHECK(wrong.status().message().find("train.momentum") != std::string::npos);

  o.train = {};
  o.defines = {{"Q", "3"}};
  auto badDefine = Session::create(sample("mlp.mg"), o);
  REQUIRE(!badDefine);
  CHECK(badDefine.status().message().find("Q") != std::string::npos);
}

TEST_CASE("Session: feed checks the name and the type") {
  SessionOptions o;
  o.defines = mlpDefines();
  auto s = makeSession(sample("mlp.mg"), o);
  Status unknown = s->feed("z", Tensor::zeros(DType::F32, {8, 12}));
  CHECK(!unknown);
  CHECK(unknown.message().find("'z'") != std::string::npos);
  CHECK(unknown.message().find("x, y") != std::string::npos);
  Status param = s->feed("w1", Tensor::zeros(DType::F32, {12, 16}));
  CHECK(!param);
  CHECK(param.message().find("parameter") != std::string::npos);
  Status shape = s->feed("x", Tensor::zeros(DType::F32, {8, 13}));
  CHECK(!shape);
  CHECK(shape.message().find("f32[8, 12]") != std::string::npos);
  CHECK(shape.message().find("f32[8, 13]") != std::string::npos);
  Status dtype = s->feed("y", Tensor::zeros(DType::F32, {8}));
  CHECK(!dtype);
  CHECK(dtype.message().find("'y'") != std::string::npos);
  CHECK(dtype.message().find("i32[8]") != std::string::npos);
  CHECK(dtype.message().find("f32[8]") != std::string::npos);
  // A step before every input is fed names the missing one.
  CHECK(s->feed("x", Tensor::zeros(DType::F32, {8, 12})));
  auto r = s->step();
  REQUIRE(!r);
  CHECK(r.status().message().find("'y'") != std::string::npos);
  CHECK(s->stepCount() == 0);
}

// feedNext binds the batch of the step after the next: the steps are those
// of feeding each batch before its step, and a feed() in between wins.
TEST_CASE("Session: feedNext binds the batch of the following step") {
  SessionOptions o;
  o.defines = mlpDefines();
  o.seed = 4;
  auto plain = makeSession(sample("mlp.mg"), o);
  auto early = makeSession(sample("mlp.mg"), o);
  // plain: batches 0, 1, 2, 5 fed before their steps. early: batch k+1
  // handed over before step k, except that batch 5 replaces batch 3.
  std::vector<double> want, got;
  for (int64_t k : {0, 1, 2, 5}) {
    feedBatch(*plain, k, 4);
    auto r = plain->step();
    REQUIRE(r);
    want.push_back(r->loss);
  }
  feedBatch(*early, 0, 4);
  for (int64_t k = 0; k < 4; ++k) {
    if (k == 3)
      feedBatch(*early, 5, 4);
    if (k < 3)
      for (const TensorInfo &in : early->inputs())
        REQUIRE(early->feedNext(in.name, batchTensor(in, k + 1, 4)));
    auto r = early->step();
    REQUIRE(r);
    got.push_back(r->loss);
  }
  CHECK(got == want);
  for (const TensorInfo &p : plain->parameters())
    CHECK(sameBytes(*plain->parameter(p.name), *early->parameter(p.name)));
  // Checked as feed.
  Status bad = early->feedNext("x", Tensor::zeros(DType::F32, {8, 13}));
  CHECK(!bad);
  CHECK(bad.message().find("f32[8, 12]") != std::string::npos);
  CHECK(!early->feedNext("w1", Tensor::zeros(DType::F32, {12, 16})));
}

TEST_CASE("Session: steps equal the interpreter on the step module") {
  SessionOptions o;
  o.defines = mlpDefines();
  o.train = adamwCosine();
  o.seed = 7;
  auto s = makeSession(sample("mlp.mg"), o);

  // The same step module through the same pipeline.
  DiagnosticEngine diag;
  frontend::CompileOptions co;
  co.defines = o.defines;
  auto m = frontend::compileModelFile(sample("mlp.mg"), co, diag);
  REQUIRE(m);
  REQUIRE(succeeded(session::applyTrainOverrides(*m, o.train, diag)));
  auto exes = session::buildModelExecutables(std::move(m), diag);
  REQUIRE(exes.succeeded());
  const ir::Module &step = *exes->step->module;
  ir::TensorMap args;
  for (const auto &arg : step.graph().arguments())
    if (arg->isPersistent())
      args[arg->name()] =
          runtime::Tensor::fromHost(ir::initParameter(*arg, 7)).toHost();

  for (int k = 0; k < 2; ++k) {
    INFO("step " << k + 1);
    feedBatch(*s, k, 4);
    for (const TensorInfo &in : s->inputs())
      args[in.name] = toHost(batchTensor(in, k, 4));
    ir::TensorMap updated;
    auto want = ir::interpret(step, args, diag, &updated);
    REQUIRE(want.succeeded());
    auto got = s->step();
    REQUIRE(got);
    checkClose(got->loss, want->at("loss").data[0], "loss");
    checkClose(got->metrics.at("lr"), want->at("lr").data[0], "lr");
    checkClose(got->metrics.at("grad_norm"), want->at("grad_norm").data[0],
               "grad_norm");
    ir::applyUpdates(args, updated);
    for (const TensorInfo &p : s->parameters()) {
      auto value = s->parameter(p.name);
      REQUIRE(value);
      std::vector<float> f = value->toFloats();
      const ir::HostTensor &ref = args.at(p.name);
      for (size_t i = 0; i < f.size(); ++i)
        checkClose(f[i], ref.data[i], p.name);
    }
  }
  CHECK(s->stepCount() == 2);
}

TEST_CASE("Session: forward equals the interpreter and changes nothing") {
  SessionOptions o;
  o.defines = mlpDefines();
  o.seed = 3;
  auto s = makeSession(sample("mlp.mg"), o);
  feedBatch(*s, 5, 4);
  auto out = s->forward();
  REQUIRE(out);
  REQUIRE(out->count("logits") == 1);
  REQUIRE(out->count("loss") == 1);

  DiagnosticEngine diag;
  frontend::CompileOptions co;
  co.defines = o.defines;
  auto m = frontend::compileModelFile(sample("mlp.mg"), co, diag);
  REQUIRE(m);
  ir::TensorMap args;
  for (const auto &arg : m->graph().arguments())
    if (arg->isPersistent()) {
      auto p = s->parameter(arg->name());
      REQUIRE(p);
      args[arg->name()] = toHost(*p);
    }
  for (const TensorInfo &in : s->inputs())
    args[in.name] = toHost(batchTensor(in, 5, 4));
  auto want = ir::interpret(*m, args, diag);
  REQUIRE(want.succeeded());
  std::vector<float> logits = out->at("logits").toFloats();
  for (size_t i = 0; i < logits.size(); ++i)
    checkClose(logits[i], want->at("logits").data[i], "logits");
  checkClose(out->at("loss").toFloats()[0], want->at("loss").data[0], "loss");
  CHECK(s->stepCount() == 0);
  auto again = s->forward();
  REQUIRE(again);
  CHECK(sameBytes(again->at("logits"), out->at("logits")));
}

TEST_CASE("Session: parameters read and write by name") {
  SessionOptions o;
  o.defines = mlpDefines();
  auto s = makeSession(sample("mlp.mg"), o);
  auto b3 = s->parameter("b3");
  REQUIRE(b3);
  CHECK(b3->shape() == std::vector<int64_t>{4});
  Tensor v = Tensor::fromFloats({4}, {1.5f, -2.f, 0.25f, 8.f});
  REQUIRE(s->setParameter("b3", v));
  auto back = s->parameter("b3");
  REQUIRE(back);
  CHECK(sameBytes(*back, v));
  // The forward program sees the new value: logits shift by b3.
  feedBatch(*s, 1, 4);
  auto out = s->forward();
  REQUIRE(out);
  REQUIRE(s->setParameter("b3", Tensor::zeros(DType::F32, {4})));
  auto zero = s->forward();
  REQUIRE(zero);
  std::vector<float> a = out->at("logits").toFloats();
  std::vector<float> z = zero->at("logits").toFloats();
  CHECK(a[3] - z[3] == doctest::Approx(8.0).epsilon(1e-5));

  Status shape = s->setParameter("b3", Tensor::zeros(DType::F32, {5}));
  CHECK(!shape);
  CHECK(shape.message().find("f32[4]") != std::string::npos);
  CHECK(shape.message().find("f32[5]") != std::string::npos);
  Status dtype = s->setParameter("b3", Tensor::zeros(DType::F64, {4}));
  CHECK(!dtype);
  CHECK(dtype.message().find("f64[4]") != std::string::npos);
  Status unknown = s->setParameter("w9", Tensor::zeros(DType::F32, {4}));
  CHECK(!unknown);
  CHECK(unknown.message().find("'w9'") != std::string::npos);
  CHECK(!s->parameter("x"));
  // The same seed gives the same parameters; another seed others.
  SessionOptions o2 = o;
  auto same = makeSession(sample("mlp.mg"), o);
  o2.seed = 1;
  auto other = makeSession(sample("mlp.mg"), o2);
  CHECK(sameBytes(*same->parameter("w1"),
                  *makeSession(sample("mlp.mg"), o)->parameter("w1")));
  CHECK(!sameBytes(*same->parameter("w1"), *other->parameter("w1")));
}

TEST_CASE("Session: an executable gives the same results as the model file") {
  TempDir dir("mgx");
  SessionOptions o;
  o.defines = mlpDefines();
  o.seed = 11;
  {
    DiagnosticEngine diag;
    frontend::CompileOptions co;
    co.defines = o.defines;
    auto m = frontend::compileModelFile(sample("mlp.mg"), co, diag);
    REQUIRE(m);
    auto exes = session::buildModelExecutables(std::move(m), diag);
    REQUIRE(exes.succeeded());
    REQUIRE(succeeded(
        backend::writeExecutableFile(*exes->step, dir.file("step.mgx"), diag)));
    REQUIRE(succeeded(backend::writeExecutableFile(
        *exes->forward, dir.file("forward.mgx"), diag)));
  }
  auto fromMg = makeSession(sample("mlp.mg"), o);
  SessionOptions plain;
  plain.seed = 11;
  auto fromMgx = makeSession(dir.file("step.mgx"), plain);
  CHECK(fromMgx->inputs().size() == 2);
  CHECK(fromMgx->parameters().size() == 6);
  for (int k = 0; k < 3; ++k) {
    feedBatch(*fromMg, k, 4);
    feedBatch(*fromMgx, k, 4);
    auto a = fromMg->step();
    auto b = fromMgx->step();
    REQUIRE(a);
    REQUIRE(b);
    CHECK(a->loss == b->loss);
    CHECK(a->metrics == b->metrics);
  }
  auto fa = fromMg->forward();
  auto fb = fromMgx->forward();
  REQUIRE(fa);
  REQUIRE(fb);
  CHECK(fb->count("lr") == 0);
  CHECK(sameBytes(fa->at("logits"), fb->at("logits")));

  // Checkpoints move between the two kinds of session.
  REQUIRE(fromMgx->saveCheckpoint(dir.file("c.safetensors")));
  auto again = makeSession(sample("mlp.mg"), o);
  Status loaded = again->loadCheckpoint(dir.file("c.safetensors"));
  INFO(loaded.message());
  REQUIRE(loaded);
  CHECK(again->stepCount() == 3);

  // A forward-only executable serves forward() and refuses step().
  auto fwd = makeSession(dir.file("forward.mgx"), plain);
  feedBatch(*fwd, 0, 4);
  CHECK(fwd->forward());
  auto st = fwd->step();
  CHECK(!st);
  CHECK(st.status().message().find("training step") != std::string::npos);
  // Defines do not apply to an executable.
  CHECK(!Session::create(dir.file("step.mgx"), o));
}

// 20 steps in one session == 10 steps, save, load into a new session, 10
// steps: bit for bit.
void checkExactResume(const char *file,
                      std::map<std::string, std::string> defines, int ids) {
  TempDir dir("resume");
  SessionOptions o;
  o.defines = std::move(defines);
  o.train = adamwCosine();
  o.seed = 42;
  auto straight = makeSession(sample(file), o);
  std::vector<double> losses;
  for (int k = 0; k < 20; ++k) {
    feedBatch(*straight, k, ids);
    auto r = straight->step();
    REQUIRE(r);
    losses.push_back(r->loss);
  }
  auto first = makeSession(sample(file), o);
  for (int k = 0; k < 10; ++k) {
    feedBatch(*first, k, ids);
    REQUIRE(first->step());
  }
  REQUIRE(first->saveCheckpoint(dir.file("ckpt.safetensors")));
  SessionOptions other = o;
  other.seed = 99; // the checkpoint, not the seed, decides
  auto second = makeSession(sample(file), other);
  Status loaded = second->loadCheckpoint(dir.file("ckpt.safetensors"));
  INFO(loaded.message());
  REQUIRE(loaded);
  CHECK(second->stepCount() == 10);
  for (int k = 10; k < 20; ++k) {
    feedBatch(*second, k, ids);
    auto r = second->step();
    REQUIRE(r);
    CHECK(r->step == k + 1);
    CHECK(r->loss == losses[static_cast<size_t>(k)]);
  }
  for (const TensorInfo &p : straight->parameters()) {
    INFO(p.name);
    CHECK(sameBytes(*straight->parameter(p.name), *second->parameter(p.name)));
  }
  // The loaded run keeps the checkpoint's seed.
  REQUIRE(second->saveCheckpoint(dir.file("again.safetensors")));
  auto again = runtime::loadCheckpoint(dir.file("again.safetensors"));
  REQUIRE(again);
  CHECK(again->info.seed == 42);
  CHECK(again->info.step == 20);
  // The metadata says what was saved.
  auto c = runtime::loadCheckpoint(dir.file("ckpt.safetensors"));
  REQUIRE(c);
  CHECK(c->info.step == 10);
  CHECK(c->info.optimizer == "adamw");
  CHECK(c->info.seed == 42);
  CHECK(c->tensors.count("opt.m." + straight->parameters()[0].name) == 1);
}

TEST_CASE("Session: exact resume from a checkpoint (MLP, AdamW, cosine)") {
  checkExactResume("mlp.mg", mlpDefines(), 4);
}

TEST_CASE("Session: exact resume from a checkpoint (tiny GPT)") {
  checkExactResume("gpt.mg", gptDefines(), 32);
}

TEST_CASE("Session: checkpoints of another model are refused") {
  TempDir dir("mismatch");
  SessionOptions o;
  o.defines = mlpDefines();
  auto s = makeSession(sample("mlp.mg"), o);
  feedBatch(*s, 0, 4);
  REQUIRE(s->step());
  REQUIRE(s->saveCheckpoint(dir.file("a.safetensors")));

  // Another width: another model, whose tensors of another shape are
  // named, with the way to start from the parameters that fit.
  SessionOptions wide = o;
  wide.defines["H"] = "20";
  auto w = makeSession(sample("mlp.mg"), wide);
  Tensor before = *w->parameter("w1");
  Status refused = w->loadCheckpoint(dir.file("a.safetensors"));
  CHECK(!refused);
  INFO(refused.message());
  CHECK(refused.message().find("another model") != std::string::npos);
  CHECK(refused.message().find("tensors of another type: 'b1' (f32[16] in "
                               "the checkpoint, f32[20] in the model)") !=
        std::string::npos);
  CHECK(refused.message().find("'w2'") != std::string::npos);
  CHECK(refused.message().find("--init-from") != std::string::npos);
  CHECK(sameBytes(before, *w->parameter("w1")));
  CHECK(w->stepCount() == 0);

  // Another batch size changes the model's source but none of its
  // tensors: it resumes, where it left off.
  SessionOptions batch = o;
  batch.defines["B"] = "4";
  auto b = makeSession(sample("mlp.mg"), batch);
  REQUIRE(b->loadCheckpoint(dir.file("a.safetensors")));
  CHECK(b->stepCount() == 1);
  CHECK(sameBytes(*s->parameter("w1"), *b->parameter("w1")));

  // Other training settings: the same model, so it loads.
  SessionOptions lr = o;
  lr.train = {{"lr", "0.5"}};
  auto l = makeSession(sample("mlp.mg"), lr);
  CHECK(l->loadCheckpoint(dir.file("a.safetensors")));
  CHECK(l->stepCount() == 1);

  // Another optimizer's state does not fit.
  SessionOptions sgd = o;
  sgd.train = {{"optimizer", "sgd"}, {"weight_decay", "0"}};
  auto g = makeSession(sample("mlp.mg"), sgd);
  Status optimizer = g->loadCheckpoint(dir.file("a.safetensors"));
  CHECK(!optimizer);
  CHECK(optimizer.message().find("adamw") != std::string::npos);

  // A file without mgc metadata is matched by its tensors: a wrong shape is
  // named.
  runtime::TensorMap tensors;
  tensors["w1"] = runtime::Tensor(ir::TensorType(ir::DType::F32, {3, 3}));
  REQUIRE(!runtime::saveSafeTensors(dir.file("b.safetensors"), tensors, {}));
  Status shape = s->loadCheckpoint(dir.file("b.safetensors"));
  CHECK(!shape);
  CHECK(shape.message().find("'w1'") != std::string::npos);
  CHECK(shape.message().find("f32[3, 3]") != std::string::npos);
  CHECK(shape.message().find("f32[12, 16]") != std::string::npos);
  // A missing file, and a corrupted one.
  CHECK(!s->loadCheckpoint(dir.file("none.safetensors")));
  {
    std::FILE *f = std::fopen(dir.file("bad.safetensors").c_str(), "wb");
    REQUIRE(f);
    std::fputs("garbage", f);
    std::fclose(f);
  }
  Status bad = s->loadCheckpoint(dir.file("bad.safetensors"));
  CHECK(!bad);
  CHECK(bad.message().find("bad.safetensors") != std::string::npos);
  CHECK(s->stepCount() == 1);
}

TEST_CASE("Session: initFrom takes parameters by name into another model") {
  TempDir dir("init-from");
  SessionOptions o;
  o.defines = mlpDefines();
  o.seed = 3;
  auto s = makeSession(sample("mlp.mg"), o);
  feedBatch(*s, 0, 4);
  REQUIRE(s->step());
  REQUIRE(s->saveCheckpoint(dir.file("a.safetensors")));

  // Another seed, wider hidden layers: w1, b1, w2, b2 and w3 change type,
  // b3 keeps it. A change of type is an error, naming the first parameter
  // in name order, that leaves the session as it was.
  SessionOptions wide = o;
  wide.seed = 5;
  wide.defines["H"] = "20";
  auto w = makeSession(sample("mlp.mg"), wide);
  Tensor before = *w->parameter("b3");
  auto refused = w->initFrom(dir.file("a.safetensors"));
  REQUIRE(!refused);
  CHECK(refused.status().message().find("parameter 'b1' from '") !=
        std::string::npos);
  CHECK(refused.status().message().find("f32[16] there but f32[20]") !=
        std::string::npos);
  CHECK(sameBytes(before, *w->parameter("b3")));

  // A file with b3, a tensor of no use and optimizer state: b3 is loaded,
  // the rest of the parameters keep the values of seed 5.
  auto f32 = [](std::vector<int64_t> shape) {
    return runtime::Tensor(ir::TensorType(ir::DType::F32, std::move(shape)));
  };
  runtime::TensorMap tensors;
  tensors["b3"] = f32({4});
  for (int64_t i = 0; i < 4; ++i)
    tensors["b3"].set(i, 1.0 + i);
  tensors["head.w"] = f32({3});
  tensors["opt.m.b3"] = f32({4});
  REQUIRE(!runtime::saveSafeTensors(dir.file("b.safetensors"), tensors, {}));
  SessionOptions seed5 = o;
  seed5.seed = 5;
  auto fresh = makeSession(sample("mlp.mg"), seed5);
  auto t = makeSession(sample("mlp.mg"), seed5);
  auto report = t->initFrom(dir.file("b.safetensors"));
  REQUIRE(report);
  CHECK(report->loaded == std::vector<std::string>{"b3"});
  CHECK(report->fresh ==
        std::vector<std::string>{"b1", "b2", "w1", "w2", "w3"});
  CHECK(report->unused == std::vector<std::string>{"head.w"});
  CHECK(report->skipped == std::vector<std::string>{"opt.m.b3"});
  CHECK(t->parameter("b3")->toFloats() ==
        std::vector<float>{1.f, 2.f, 3.f, 4.f});
  for (const char *name : {"w1", "b1", "w2", "w3"})
    CHECK(sameBytes(*t->parameter(name), *fresh->parameter(name)));

  // The trained model's whole state dict: every parameter, step 0, and a
  // step from there trains as the saved session's next step would not
  // (its optimizer state is fresh).
  auto u = makeSession(sample("mlp.mg"), seed5);
  auto all = u->initFrom(dir.file("a.safetensors"));
  REQUIRE(all);
  CHECK(all->loaded.size() == 6);
  CHECK(all->fresh.empty());
  CHECK(all->unused.empty());
  CHECK(!all->skipped.empty());
  CHECK(u->stepCount() == 0);
  for (const char *name : {"w1", "b1", "w2", "b2", "w3", "b3"})
    CHECK(sameBytes(*u->parameter(name), *s->parameter(name)));
  feedBatch(*u, 1, 4);
  REQUIRE(u->step());
  CHECK(u->stepCount() == 1);

  // A checkpoint with no parameter of the model, and a missing file.
  runtime::TensorMap other;
  other["v1"] = f32({2});
  REQUIRE(!runtime::saveSafeTensors(dir.file("c.safetensors"), other, {}));
  auto none = u->initFrom(dir.file("c.safetensors"));
  REQUIRE(!none);
  CHECK(none.status().message().find("none of its 1 tensors") !=
        std::string::npos);
  CHECK(!u->initFrom(dir.file("missing.safetensors")));
}

// Labels from a fixed random teacher (a linear map D -> C, argmax); the
// student MLP learns it from fresh batches and is measured on held-out ones.
TEST_CASE("Session: the MLP learns a teacher task") {
  const int B = 32, D = 8, H = 32, C = 4;
  SessionOptions o;
  o.defines = {{"B", std::to_string(B)},
               {"D", std::to_string(D)},
               {"H", std::to_string(H)},
               {"C", std::to_string(C)}};
  o.train = {{"lr", "0.01"}, {"weight_decay", "0"}};
  o.seed = 1;
  auto s = makeSession(sample("mlp.mg"), o);
  std::vector<float> teacher(D * C);
  for (int i = 0; i < D * C; ++i)
    teacher[i] = static_cast<float>(2 * uniform(1000, i) - 1);
  auto batch = [&](uint64_t k) {
    std::vector<float> x(B * D);
    std::vector<int32_t> y(B);
    for (int b = 0; b < B; ++b) {
      for (int d = 0; d < D; ++d)
        x[b * D + d] = static_cast<float>(2 * uniform(k, b * D + d) - 1);
      int best = 0;
      float bestScore = -1e30f;
      for (int c = 0; c < C; ++c) {
        float score = 0;
        for (int d = 0; d < D; ++d)
          score += x[b * D + d] * teacher[d * C + c];
        if (score > bestScore) {
          bestScore = score;
          best = c;
        }
      }
      y[b] = best;
    }
    REQUIRE(s->feed("x", Tensor::fromFloats({B, D}, x)));
    REQUIRE(s->feed("y", Tensor::fromInts({B}, y)));
    return y;
  };
  auto accuracy = [&] {
    int correct = 0, total = 0;
    for (uint64_t k = 0; k < 8; ++k) {
      std::vector<int32_t> y = batch(1'000'000 + k); // never trained on
      auto out = s->forward();
      REQUIRE(out);
      std::vector<float> logits = out->at("logits").toFloats();
      for (int b = 0; b < B; ++b) {
        int best = 0;
        for (int c = 1; c < C; ++c)
          if (logits[b * C + c] > logits[b * C + best])
            best = c;
        correct += best == y[b];
        ++total;
      }
    }
    return static_cast<double>(correct) / total;
  };
  double before = accuracy();
  double firstLoss = 0, lastLoss = 0;
  for (uint64_t k = 0; k < 300; ++k) {
    batch(k);
    auto r = s->step();
    REQUIRE(r);
    (k == 0 ? firstLoss : lastLoss) = r->loss;
  }
  double after = accuracy();
  INFO("accuracy " << before << " -> " << after << ", loss " << firstLoss
                   << " -> " << lastLoss);
  CHECK(after >= 0.9);
  CHECK(lastLoss < 0.5 * firstLoss);
}

} // namespace
} // namespace mgc

TEST_CASE("session: communication per device on a mesh, and an error "
          "without one") {
  mgc::SessionOptions options;
  options.defines = {{"B", "16"}, {"D", "12"}, {"H", "24"}, {"C", "5"}};
  options.mesh = "dp=2,tp=2";
  auto s =
      mgc::Session::create(mgc::test::sourceDir() + "/samples/mlp.mg", options);
  REQUIRE(s);
  for (const mgc::TensorInfo &in : (*s)->inputs())
    REQUIRE((*s)->feed(in.name, mgc::Tensor::zeros(in.dtype, in.shape)));
  REQUIRE((*s)->step());
  auto devices = (*s)->communication();
  REQUIRE(devices);
  REQUIRE(devices->size() == 4);
  for (const mgc::DeviceCommunication &d : *devices) {
    CHECK((d.exposed >= 0 && d.exposed <= 1));
    CHECK(d.bytesPerStep > 0);
  }
  CHECK((*s)->rank() == 0);
  CHECK((*s)->processCount() == 1);
  options.mesh.clear();
  auto one =
      mgc::Session::create(mgc::test::sourceDir() + "/samples/mlp.mg", options);
  REQUIRE(one);
  auto none = (*one)->communication();
  CHECK_FALSE(none);
  CHECK(none.status().message().find("only for a step on a mesh") !=
        std::string::npos);
}

TEST_CASE("session: on a mesh each device initialises its own parts, equal "
          "to the whole parameters of one device") {
  mgc::SessionOptions options;
  options.defines = {{"V", "64"}, {"T", "8"}, {"D", "16"},
                     {"H", "2"},  {"L", "1"}, {"B", "4"}};
  auto one =
      mgc::Session::create(mgc::test::sourceDir() + "/samples/gpt.mg", options);
  REQUIRE(one);
  for (const char *mesh : {"dp=2,tp=2", "tp=3", "dp=2"}) {
    options.mesh = mesh;
    options.zero = std::string(mesh) == "dp=2" ? 2 : 0;
    auto s = mgc::Session::create(mgc::test::sourceDir() + "/samples/gpt.mg",
                                  options);
    REQUIRE(s);
    for (const mgc::TensorInfo &p : (*one)->parameters()) {
      INFO(mesh << ": " << p.name);
      auto a = (*one)->parameter(p.name), b = (*s)->parameter(p.name);
      REQUIRE(a);
      REQUIRE(b);
      REQUIRE(a->nbytes() == b->nbytes());
      CHECK(std::memcmp(a->data(), b->data(), a->nbytes()) == 0);
    }
    // forward() joins the parts and runs on one device: the same outputs.
    for (auto *session : {one->get(), s->get()})
      for (const mgc::TensorInfo &in : session->inputs())
        REQUIRE(session->feed(in.name, mgc::Tensor::zeros(in.dtype, in.shape)));
    auto fa = (*one)->forward(), fb = (*s)->forward();
    REQUIRE(fa);
    REQUIRE(fb);
    REQUIRE(fa->size() == fb->size());
    for (const auto &[name, t] : *fa) {
      INFO(mesh << ": output " << name);
      REQUIRE(fb->count(name));
      CHECK(std::memcmp(t.data(), fb->at(name).data(), t.nbytes()) == 0);
    }
  }
}

TEST_CASE("session: a pipeline (pp in the mesh) reports how it ran, and "
          "refuses pipeline settings without one") {
  mgc::SessionOptions options;
  options.defines = {{"V", "64"}, {"T", "8"}, {"D", "16"},
                     {"H", "2"},  {"L", "4"}, {"B", "8"}};
  options.mesh = "pp=2,dp=2";
  options.accumulate = 2;
  options.schedule = "zb-h1";
  auto s =
      mgc::Session::create(mgc::test::sourceDir() + "/samples/gpt.mg", options);
  REQUIRE(s);
  for (const mgc::TensorInfo &in : (*s)->inputs())
    REQUIRE((*s)->feed(in.name, mgc::Tensor::zeros(in.dtype, in.shape)));
  REQUIRE((*s)->step());
  REQUIRE((*s)->step());
  auto report = (*s)->pipelineReport();
  REQUIRE(report);
  CHECK(report->stages == 2);
  CHECK(report->microBatches == 2);
  CHECK(report->schedule == "zb-h1");
  CHECK((report->bubble > 0 && report->bubble < 1));
  CHECK((report->predictedBubble > 0 && report->predictedBubble < 1));
  // Each stage device of dp=2 sends its part of the [B/2/2, T, D]
  // activation and of its gradient, per micro-batch.
  REQUIRE(report->bytesPerStep.size() == 2);
  CHECK(report->bytesPerStep[0] == 2 * 2 * 2 * 8 * 16 * 4);
  CHECK(report->bytesPerStep[1] == report->bytesPerStep[0]);

  options.mesh = "dp=2";
  auto plain =
      mgc::Session::create(mgc::test::sourceDir() + "/samples/gpt.mg", options);
  REQUIRE_FALSE(plain);
  CHECK(plain.status().message().find("are for a pipeline") !=
        std::string::npos);
  options.schedule.clear();
  auto noPipeline =
      mgc::Session::create(mgc::test::sourceDir() + "/samples/gpt.mg", options);
  REQUIRE(noPipeline);
  CHECK_FALSE((*noPipeline)->pipelineReport());
}
