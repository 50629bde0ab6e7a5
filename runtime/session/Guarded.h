// No exception crosses the library's boundary. What the standard library
// throws inside a call (std::system_error when the system refuses a thread,
// as a large simulated mesh under a process or memory limit meets it;
// std::bad_alloc) becomes that call's error instead of ending the embedding
// program.
#pragma once

#include "mgc/Session.h"

#include <exception>
#include <new>
#include <string>
#include <system_error>

namespace mgc::session {

// Runs `body` (returning a Status or a Result) and turns an exception into
// its error, naming the call.
template <typename F>
auto guarded(const char *call, F &&body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::system_error &e) {
    return Status::error(std::string("error: ") + call +
                         ": the system refused a resource (" + e.what() +
                         "); a simulated mesh runs threads for every device: "
                         "try a smaller mesh or --threads, or raise the "
                         "limits on processes and memory");
  } catch (const std::bad_alloc &) {
    return Status::error(std::string("error: ") + call + ": out of memory");
  } catch (const std::exception &e) {
    return Status::error(std::string("error: ") + call + ": " + e.what());
  }
}

} // namespace mgc::session
