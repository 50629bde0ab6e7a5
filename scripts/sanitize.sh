#!/usr/bin/env bash
# Runs the whole test suite under AddressSanitizer and UndefinedBehavior-
# Sanitizer: a GCC build of its own in build-asan/ (or $MGC_BUILD_DIR),
# without the CUDA backend (nvcc takes no sanitizer flags), then
# scripts/test.sh against it. Ends with test.sh's "N passed, N failed".
# A sanitizer report fails the test that triggered it: UBSan halts on the
# first error, ASan on any, leaks included (but those of the libraries in
# scripts/lsan-suppressions.txt). GCC rather than clang: clang 14 with
# libstdc++ 12 cannot compile LLVM 14's JSON.h in C++20.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export MGC_BUILD_DIR=${MGC_BUILD_DIR:-$root/build-asan}
export MGC_CUDA=OFF
# allocator_may_return_null: the arena is allocated with nothrow new and a
# refusal reported (tests/lit/run/flags-checked.test), as without ASan.
# fast_unwind_on_malloc=0: Open MPI's libraries have no frame pointers, so
# the fast unwinder records their allocations without the frames that name
# the library, and the suppressions below cannot match them (the unit tests'
# in-process MPI tests leaked 117 KB "from an unknown module" at exit).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0:allocator_may_return_null=1:fast_unwind_on_malloc=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/scripts/lsan-suppressions.txt:print_suppressions=0}
# Configure once with the sanitizers; test.sh's build step keeps the cache.
"$root/scripts/install-deps.sh"
cmake -S "$root" -B "$MGC_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMGC_SANITIZE=ON -DMGC_CUDA=OFF >/dev/null || { echo "0 passed, 1 failed"; exit 1; }
exec "$root/scripts/test.sh"
