// Faults injected on purpose, for the tests that prove a job of several
// processes never hangs silently: MGC_FAULT=RANK:STEP:KIND makes rank RANK,
// at the start of step STEP (counted from 1), hang (sleep for ever), exit
// (end the process at once, as a crash would) or corrupt (send its next
// message empty, so that its receiver sees the wrong size). Read once per
// process.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

namespace mgc::backend {

struct Fault {
  int rank = 0;
  int64_t step = 1;
  enum class Kind { Hang, Exit, Corrupt } kind = Kind::Hang;
};

// The fault MGC_FAULT asks for, or nullopt when it is unset; a malformed
// value sets `error` (naming the variable and the expected form).
std::optional<Fault> faultFromEnvironment(std::string &error);

// Set by a corrupt fault; the MPI communicator sends its next message
// empty (one byte where it is empty) and clears it.
std::atomic<bool> &corruptNextMessage();

} // namespace mgc::backend
