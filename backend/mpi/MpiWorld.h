// The job's processes over MPI: MPI_COMM_WORLD as a ProcessGroup. MPI is
// initialised once per process, on first use (with MPI_THREAD_MULTIPLE, as
// every device's communication queue calls MPI from its own thread; with a
// lower level the calls are serialised), and finalised at exit.
#pragma once

#include "backend/ProcessGroup.h"

#include <string>

namespace mgc::backend::mpi {

// The world, initialising MPI on the first call; null with `error` set when
// MPI cannot be initialised.
ProcessGroup *world(std::string &error);

// The world if MPI has been initialised by world(), else null.
ProcessGroup *existingWorld();

// Sets how long collectives between processes wait for their peers (the
// communicators made after it use it).
void setCommTimeout(double seconds);

} // namespace mgc::backend::mpi
