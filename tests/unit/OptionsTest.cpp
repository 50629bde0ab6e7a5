#include "tools/mgc/Options.h"

#include <doctest/doctest.h>

using namespace mgc::cli;

namespace {
CommandSpec testSpec() {
  CommandSpec s;
  s.name = "compile";
  s.usage = "mgc compile MODEL.mg";
  s.summary = "Compile.";
  s.positionalName = "a model file";
  s.minPositionals = s.maxPositionals = 1;
  s.options = {{"-D", "NAME=VALUE", "override", true},
               {"--emit", "KIND", "what", false, {"ir", "plan"}},
               {"-o", "FILE", "output"},
               {"--time-passes", "", "timing"}};
  return s;
}
std::optional<ParsedArgs> parse(std::vector<std::string> args,
                                std::string &error) {
  return parseArgs(testSpec(), args, error);
}
} // namespace

TEST_CASE("options in every accepted form") {
  std::string error;
  auto a = parse({"m.mg", "-D", "B=4", "-DT=8", "--emit=plan", "-o", "out",
                  "--time-passes"},
                 error);
  REQUIRE(a);
  CHECK(a->positionals == std::vector<std::string>{"m.mg"});
  CHECK(a->getAll("-D") == std::vector<std::string>{"B=4", "T=8"});
  CHECK(a->get("--emit") == "plan");
  CHECK(a->get("-o") == "out");
  CHECK(a->has("--time-passes"));
  CHECK(!a->has("--nothing"));
  auto b = parse({"--emit", "ir", "-"}, error);
  REQUIRE(b);
  CHECK(b->positionals == std::vector<std::string>{"-"});
  CHECK(b->get("--emit") == "ir");
}

TEST_CASE("list options come back as owned pieces, however long") {
  std::string error;
  // Longer than a string's inline buffer: pieces of a temporary would
  // point into freed memory.
  auto a = parse({"m.mg", "-o", "15496, 11,616,1438 ,318,,50256"}, error);
  REQUIRE(a);
  std::vector<std::string> pieces = a->getList("-o");
  CHECK(pieces == std::vector<std::string>{"15496", "11", "616", "1438", "318",
                                           "", "50256"});
  CHECK(a->getList("--emit") == std::vector<std::string>{""});
}

TEST_CASE("usage errors name the flag") {
  std::string error;
  CHECK(!parse({"m.mg", "--frob"}, error));
  CHECK(error ==
        "unknown option '--frob' for 'mgc compile' (see 'mgc compile --help')");
  // A near miss gets the closest option of the command (the value of the
  // --name=value form is not part of the name).
  CHECK(!parse({"m.mg", "--time-pases"}, error));
  CHECK(error == "unknown option '--time-pases' for 'mgc compile'; did you "
                 "mean '--time-passes'? (see 'mgc compile --help')");
  CHECK(!parse({"m.mg", "--emitt=ir"}, error));
  CHECK(error == "unknown option '--emitt' for 'mgc compile'; did you mean "
                 "'--emit'? (see 'mgc compile --help')");
  CHECK(!parse({"m.mg", "-d", "B=4"}, error));
  CHECK(error == "unknown option '-d' for 'mgc compile'; did you mean '-D'? "
                 "(see 'mgc compile --help')");
  CHECK(!parse({"m.mg", "--hepl"}, error));
  CHECK(error == "unknown option '--hepl' for 'mgc compile'; did you mean "
                 "'--help'? (see 'mgc compile --help')");
  CHECK(!parse({"m.mg", "--emit=asm"}, error));
  CHECK(error ==
        "invalid value 'asm' for option '--emit'; expected one of: ir, plan");
  CHECK(!parse({"m.mg", "-o"}, error));
  CHECK(error == "option '-o' needs a value (FILE)");
  CHECK(!parse({"m.mg", "--time-passes=yes"}, error));
  CHECK(error == "option '--time-passes' takes no value");
  CHECK(!parse({"m.mg", "--emit=ir", "--emit=plan"}, error));
  CHECK(error == "option '--emit' given more than once");
  CHECK(!parse({}, error));
  CHECK(error == "'mgc compile' needs a model file (see 'mgc compile --help')");
  CHECK(!parse({"a.mg", "b.mg"}, error));
  CHECK(error == "unexpected argument 'b.mg' for 'mgc compile'");
}

TEST_CASE("--help wins over missing arguments and lists every option") {
  std::string error;
  auto a = parse({"--help"}, error);
  REQUIRE(a);
  CHECK(a->helpRequested);
  std::string help = formatHelp(testSpec());
  CHECK(help.find("usage: mgc compile MODEL.mg") == 0);
  CHECK(help.find("-D NAME=VALUE") != std::string::npos);
  CHECK(help.find("--emit=KIND") != std::string::npos);
  CHECK(help.find("(ir, plan)") != std::string::npos);
}

TEST_CASE("integer lists: each piece bounded, the bad one named") {
  std::string error;
  auto a = parse({"m.mg", "-o", " 3, 1,4 "}, error);
  REQUIRE(a);
  std::vector<int64_t> out{9};
  CHECK(a->getIntList("-o", 1, 10, "weights", out) == "");
  CHECK(out == std::vector<int64_t>{3, 1, 4});
  for (const char *bad : {"3,,4", "3,x", "3,11", "3,0", "3,-1",
                          "3,99999999999999999999", "3,4.0"}) {
    auto b = parse({"m.mg", "-o", bad}, error);
    REQUIRE(b);
    std::string why = b->getIntList("-o", 1, 10, "weights", out);
    CHECK(llvm::StringRef(why).startswith(
        "-o expects weights separated by commas, got '"));
  }
  auto c = parse({"m.mg", "-o", "3,99999999999999999999"}, error);
  CHECK(c->getIntList("-o", 1, 10, "weights", out) ==
        "-o expects weights separated by commas, got '99999999999999999999'");
}
