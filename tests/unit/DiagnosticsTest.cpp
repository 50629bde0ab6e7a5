#include "support/Diagnostics.h"

#include <doctest/doctest.h>

using namespace mgc;

TEST_CASE("errors show file:line:col, the source line and a caret") {
  std::string out;
  llvm::raw_string_ostream os(out);
  DiagnosticEngine diag(os);
  diag.addSource("model.mg", "const B = 4\nx = y + 1\n");
  diag.error(Loc::make("model.mg", 2, 5), "unknown name 'y'");
  diag.note(Loc::make("model.mg", 1, 7), "declared here");
  os.flush();
  CHECK(out == "model.mg:2:5: error: unknown name 'y'\n"
               "x = y + 1\n"
               "    ^\n"
               "model.mg:1:7: note: declared here\n"
               "const B = 4\n"
               "      ^\n");
  CHECK(diag.errorCount() == 1);
  CHECK(diag.hasErrors());
}

TEST_CASE("a location in a file that is not loaded prints without the line") {
  std::string out;
  llvm::raw_string_ostream os(out);
  DiagnosticEngine diag(os);
  diag.warning(Loc::make("elsewhere.mg", 3, 9), "unused parameter 'w'");
  os.flush();
  CHECK(out == "elsewhere.mg:3:9: warning: unused parameter 'w'\n");
  CHECK(diag.warningCount() == 1);
  CHECK(!diag.hasErrors());
}

TEST_CASE(
    "errors past the limit are counted but not printed, nor their notes") {
  std::string out;
  llvm::raw_string_ostream os(out);
  DiagnosticEngine diag(os);
  diag.setErrorLimit(2);
  for (int i = 0; i < 5; ++i) {
    diag.error("e" + llvm::Twine(i));
    diag.note(Loc{}, "n" + llvm::Twine(i));
  }
  os.flush();
  CHECK(diag.errorCount() == 5);
  CHECK(out.find("e1") != std::string::npos);
  CHECK(out.find("n1") != std::string::npos);
  CHECK(out.find("e2") == std::string::npos);
  CHECK(out.find("n2") == std::string::npos);
  CHECK(out.find("too many errors") != std::string::npos);
}

TEST_CASE(
    "disabled warnings are neither printed nor counted, nor their notes") {
  std::string out;
  llvm::raw_string_ostream os(out);
  DiagnosticEngine diag(os);
  diag.setWarningsEnabled(false);
  diag.warning(Loc{}, "w");
  diag.note(Loc{}, "about w");
  diag.error("e");
  diag.note(Loc{}, "about e");
  os.flush();
  CHECK(diag.warningCount() == 0);
  CHECK(out == "mgc: error: e\nmgc: note: about e\n");
}

TEST_CASE("a file that cannot be read is an error naming it") {
  std::string out;
  llvm::raw_string_ostream os(out);
  DiagnosticEngine diag(os);
  CHECK(!diag.addSourceFile("/nonexistent/dir/model.mg"));
  os.flush();
  CHECK(out.find("cannot read input file '/nonexistent/dir/model.mg'") !=
        std::string::npos);
}
