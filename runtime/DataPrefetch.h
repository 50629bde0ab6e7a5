// Loading on a background thread: a source wrapped so that the next batches
// are produced ahead of time into a bounded queue while the step runs.
#pragma once

#include "runtime/DataSource.h"

#include <memory>

namespace mgc::runtime {

// Wraps `inner`, which from now on is used only by the loading thread. The
// thread keeps up to `depth` (clamped to [1, 16]) finished batches queued.
// An error of `inner` (or an allocation failure) reaches the consumer as the
// error of next(), at the position where it happened; the thread then stops
// and next() keeps returning that error until a seek. seek() stops the
// thread, drops the queue, repositions `inner` and starts again.
// Destruction stops the thread promptly: it finishes at most the batch it is
// producing and never waits for the consumer.
std::unique_ptr<BatchSource>
makePrefetchingSource(std::unique_ptr<BatchSource> inner, int depth = 2);

} // namespace mgc::runtime
