// MGC_API marks the public classes and functions of the executor library:
// libmgc.so is built with hidden visibility and exports only these.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define MGC_API __attribute__((visibility("default")))
#else
#define MGC_API
#endif
