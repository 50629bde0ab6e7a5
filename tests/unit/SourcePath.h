// Where the unit tests find the checkout's own files (samples/, docs/).
#pragma once

#include <string>

namespace mgc::test {

// The checkout's root: $MGC_SOURCE_DIR when set; else the checkout the
// tests were built from, when it is still there; else the current
// directory. A test binary carried to another machine (the GPU check) thus
// runs from the root of any copy of the checkout.
const std::string &sourceDir();

} // namespace mgc::test
