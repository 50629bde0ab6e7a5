// The pass manager: pipeline parsing against the registry, verification
// after each pass, IR dumps, timing and the dump directory.
#include "passes/PassManager.h"
#include "ir/Builder.h"
#include "ir/Printer.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace mgc;
using namespace mgc::ir;
using namespace mgc::passes;

namespace {

// y = neg(neg(x)) + neg(neg(x)), plus a dead exp: every registered pass has
// something to do.
void buildSample(Module &m) {
  Graph &g = m.graph();
  Builder b(g);
  TensorType t(DType::F32, {2, 3});
  Value *x = g.addInput("x", t);
  Value *n1 = b.create(OpKind::Neg, {b.create(OpKind::Neg, {x}).value}).value;
  Value *n2 = b.create(OpKind::Neg, {b.create(OpKind::Neg, {x}).value}).value;
  b.create(OpKind::Exp, {x});
  g.addOutput("y", b.create(OpKind::Add, {n1, n2}).value);
}

struct PMFixture {
  Module module{"m"};
  std::string diagText, dumpText;
  llvm::raw_string_ostream diagStream{diagText}, dumpStream{dumpText};
  DiagnosticEngine diag{diagStream};

  PMFixture() { buildSample(module); }
  std::string &diags() { return diagStream.str(); }
  std::string &dumps() { return dumpStream.str(); }
};

size_t countOf(const std::string &text, const std::string &needle) {
  size_t n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos;
       pos = text.find(needle, pos + 1))
    ++n;
  return n;
}

// Records that it ran; changes nothing.
class RecordingPass : public Pass {
public:
  RecordingPass(std::string name, std::vector<std::string> &log)
      : name_(std::move(name)), log_(log) {}
  llvm::StringRef name() const override { return name_; }
  LogicalResult run(Module &, DiagnosticEngine &) override {
    log_.push_back(name_);
    return success();
  }

private:
  std::string name_;
  std::vector<std::string> &log_;
};

// Declares a wrong result type on the first op: the verifier must notice.
class BreakTypesPass : public Pass {
public:
  llvm::StringRef name() const override { return "break-types"; }
  LogicalResult run(Module &m, DiagnosticEngine &) override {
    if (!m.graph().ops().empty())
      m.graph().ops().front()->result()->setType(TensorType(DType::F64, {7}));
    return success();
  }
};

// Fails without saying why.
class SilentFailurePass : public Pass {
public:
  llvm::StringRef name() const override { return "silent-failure"; }
  LogicalResult run(Module &, DiagnosticEngine &) override { return failure(); }
};

} // namespace

TEST_CASE("the registry lists every pass, in the order of Passes.def") {
  std::vector<std::string> names;
  for (const PassInfo &info : registeredPasses()) {
    names.push_back(info.name.str());
    CHECK(!info.summary.empty());
    std::unique_ptr<Pass> p = info.create();
    REQUIRE(p);
    CHECK(p->name() == info.name);
  }
  CHECK(names == std::vector<std::string>{"canonicalize", "cse", "dce",
                                          "mixed-precision", "eval-mode", "accuracy", "autodiff",
                                          "optimizer", "shard-strategy",
                                          "shard", "bucket", "fuse"});
}

TEST_CASE("parsePipeline runs the named passes in order") {
  PMFixture f;
  PassManagerOptions options;
  options.printIRAfter = {"all"};
  PassManager pm(options, f.dumpStream);
  REQUIRE(succeeded(pm.parsePipeline(" canonicalize, cse,dce ", f.diag)));
  REQUIRE(succeeded(pm.run(f.module, f.diag)));
  const std::string &d = f.dumps();
  size_t c = d.find("// -----// IR Dump After canonicalize //----- //\n");
  size_t s = d.find("// -----// IR Dump After cse //----- //\n");
  size_t e = d.find("// -----// IR Dump After dce //----- //\n");
  REQUIRE(c != std::string::npos);
  REQUIRE(s != std::string::npos);
  REQUIRE(e != std::string::npos);
  CHECK(c < s);
  CHECK(s < e);
  CHECK(countOf(d, "IR Dump") == 3);
  CHECK(f.diags().empty());
  // neg(neg(x)) twice is x + x; the exp was dead.
  CHECK(f.module.graph().numOps() == 1);
}

TEST_CASE("an empty pipeline has no passes") {
  for (const char *text : {"", "   "}) {
    PMFixture f;
    PassManagerOptions options;
    options.printIRAfter = {"all"};
    options.timePasses = true;
    PassManager pm(options, f.dumpStream);
    std::string before = printModuleToString(f.module);
    REQUIRE(succeeded(pm.parsePipeline(text, f.diag)));
    REQUIRE(succeeded(pm.run(f.module, f.diag)));
    CHECK(printModuleToString(f.module) == before);
    CHECK(countOf(f.dumps(), "IR Dump") == 0);
  }
}

TEST_CASE("an unknown pass is reported with the list of known passes") {
  PMFixture f;
  PassManager pm({}, f.dumpStream);
  CHECK(failed(pm.parsePipeline("canonicalize,csee", f.diag)));
  CHECK(f.diags() ==
        "mgc: error: unknown pass 'csee' in --passes; known "
        "passes: canonicalize, cse, dce, mixed-precision, eval-mode, accuracy, autodiff, optimizer, "
        "shard-strategy, shard, bucket, fuse\n");
  // Nothing was added: the module is untouched.
  std::string before = printModuleToString(f.module);
  REQUIRE(succeeded(pm.run(f.module, f.diag)));
  CHECK(printModuleToString(f.module) == before);
}

TEST_CASE("empty elements in a pipeline are errors") {
  for (const char *text : {"cse,,dce", "cse,", ",dce", "cse, ,dce"}) {
    CAPTURE(text);
    PMFixture f;
    PassManager pm({}, f.dumpStream);
    CHECK(failed(pm.parsePipeline(text, f.diag)));
    CHECK(f.diags().find("empty pass name in --passes") != std::string::npos);
    CHECK(f.diag.errorCount() == 1);
  }
}

TEST_CASE("checkOptions accepts registered names, added passes and all") {
  PMFixture f;
  std::vector<std::string> log;
  PassManagerOptions options;
  options.printIRBefore = {"cse", "all"};
  options.printIRAfter = {"dce,recorder"};
  PassManager pm(options, f.dumpStream);
  pm.addPass(std::make_unique<RecordingPass>("recorder", log));
  CHECK(succeeded(pm.checkOptions(f.diag)));
  CHECK(f.diags().empty());

  PassManagerOptions bad;
  bad.printIRAfter = {"cse", "nope"};
  bad.printIRBefore = {"dc"};
  PassManager pm2(bad, f.dumpStream);
  CHECK(failed(pm2.checkOptions(f.diag)));
  CHECK(f.diags().find("unknown pass 'nope' in --print-ir-after") !=
        std::string::npos);
  CHECK(f.diags().find("unknown pass 'dc' in --print-ir-before") !=
        std::string::npos);
  CHECK(f.diag.errorCount() == 2);
}

TEST_CASE("print-ir-before and print-ir-after select passes by name") {
  PMFixture f;
  PassManagerOptions options;
  options.printIRBefore = {"cse"};
  options.printIRAfter = {"dce"};
  PassManager pm(options, f.dumpStream);
  REQUIRE(succeeded(pm.parsePipeline("canonicalize,cse,dce", f.diag)));
  REQUIRE(succeeded(pm.run(f.module, f.diag)));
  const std::string &d = f.dumps();
  CHECK(countOf(d, "IR Dump") == 2);
  size_t before =
      d.find("// -----// IR Dump Before cse //----- //\nmodule @m {");
  size_t after = d.find("// -----// IR Dump After dce //----- //\nmodule @m {");
  REQUIRE(before != std::string::npos);
  REQUIRE(after != std::string::npos);
  CHECK(before < after);
  // Before cse, canonicalize has made both sums x, but the dead exp is
  // still there; after dce it is gone.
  std::string beforeText = d.substr(before, after - before);
  CHECK(beforeText.find("exp(") != std::string::npos);
  CHECK(d.substr(after).find("exp(") == std::string::npos);
}

TEST_CASE("verify-each catches a pass that breaks the module") {
  PMFixture f;
  std::vector<std::string> log;
  PassManager pm({}, f.dumpStream);
  pm.addPass(std::make_unique<BreakTypesPass>());
  pm.addPass(std::make_unique<RecordingPass>("after", log));
  CHECK(failed(pm.run(f.module, f.diag)));
  CHECK(
      f.diags().find("error: pass 'break-types' produced an invalid module") ==
      f.diags().find("error:"));
  CHECK(f.diags().find("declares result type f64[7]") != std::string::npos);
  CHECK(log.empty()); // the pipeline stopped

  // Without verification the same pipeline runs to the end.
  PMFixture g;
  PassManagerOptions options;
  options.verifyEach = false;
  PassManager unchecked(options, g.dumpStream);
  unchecked.addPass(std::make_unique<BreakTypesPass>());
  unchecked.addPass(std::make_unique<RecordingPass>("after", log));
  CHECK(succeeded(unchecked.run(g.module, g.diag)));
  CHECK(log == std::vector<std::string>{"after"});
}

TEST_CASE("a pass that fails silently still produces an error") {
  PMFixture f;
  PassManager pm({}, f.dumpStream);
  pm.addPass(std::make_unique<SilentFailurePass>());
  CHECK(failed(pm.run(f.module, f.diag)));
  CHECK(f.diags() == "mgc: error: pass 'silent-failure' failed\n");
}

TEST_CASE("time-passes prints one row per pass and a total") {
  PMFixture f;
  PassManagerOptions options;
  options.timePasses = true;
  PassManager pm(options, f.dumpStream);
  REQUIRE(succeeded(pm.parsePipeline("cse,dce", f.diag)));
  REQUIRE(succeeded(pm.run(f.module, f.diag)));
  const std::string &d = f.dumps();
  CHECK(d.find("Total Execution Time:") != std::string::npos);
  CHECK(d.find("----Wall Time----  ----Name----") != std::string::npos);
  size_t cse = d.find("%)  cse\n"), dce = d.find("%)  dce\n"),
         total = d.find("(100.0%)  Total\n");
  REQUIRE(cse != std::string::npos);
  REQUIRE(dce != std::string::npos);
  REQUIRE(total != std::string::npos);
  CHECK(cse < dce);
  CHECK(dce < total);
}

TEST_CASE("dump-dir writes the input and one numbered file per pass") {
  llvm::SmallString<128> root;
  REQUIRE(!llvm::sys::fs::createUniqueDirectory("mgc-pm-test", root));
  llvm::SmallString<128> dir(root);
  llvm::sys::path::append(dir, "nested", "dumps"); // created on demand

  PMFixture f;
  PassManagerOptions options;
  options.dumpDir = std::string(dir);
  PassManager pm(options, f.dumpStream);
  REQUIRE(succeeded(pm.parsePipeline("canonicalize,cse,dce", f.diag)));
  REQUIRE(succeeded(pm.run(f.module, f.diag)));

  auto read = [&](const char *name) -> std::string {
    llvm::SmallString<128> path(dir);
    llvm::sys::path::append(path, name);
    auto buf = llvm::MemoryBuffer::getFile(path);
    REQUIRE_MESSAGE(bool(buf), "missing " << name);
    return (*buf)->getBuffer().str();
  };
  std::string input = read("00-input.mgir");
  std::string canon = read("01-canonicalize.mgir");
  read("02-cse.mgir");
  std::string dce = read("03-dce.mgir");
  CHECK(input.find("neg(") != std::string::npos);
  CHECK(canon.find("neg(") == std::string::npos);
  CHECK(canon.find("exp(") != std::string::npos);
  CHECK(dce == printModuleToString(f.module));

  unsigned files = 0;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec))
    ++files;
  CHECK(files == 4);
  llvm::sys::fs::remove_directories(root);
}

TEST_CASE("dump-dir reports a directory it cannot create") {
  llvm::SmallString<128> file;
  REQUIRE(!llvm::sys::fs::createTemporaryFile("mgc-pm-test", "txt", file));
  llvm::SmallString<128> dir(file);
  llvm::sys::path::append(dir, "sub"); // below a regular file

  PMFixture f;
  PassManagerOptions options;
  options.dumpDir = std::string(dir);
  PassManager pm(options, f.dumpStream);
  REQUIRE(succeeded(pm.parsePipeline("dce", f.diag)));
  CHECK(failed(pm.run(f.module, f.diag)));
  CHECK(f.diags().find("cannot create dump directory '" + std::string(dir) +
                       "'") != std::string::npos);
  CHECK(f.module.graph().numOps() == 6); // nothing ran
  llvm::sys::fs::remove(file);
}
