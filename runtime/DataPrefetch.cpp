#include "runtime/DataPrefetch.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

namespace mgc::runtime {

namespace {

class PrefetchingSource : public BatchSource {
public:
  PrefetchingSource(std::unique_ptr<BatchSource> inner, int depth)
      : inner_(std::move(inner)), depth_(std::clamp(depth, 1, 16)),
        position_(inner_->position()) {
    start();
  }
  ~PrefetchingSource() override { stop(); }

  const std::vector<InputSpec> &inputs() const override {
    return inner_->inputs(); // immutable after creation
  }
  std::optional<int64_t> batchesPerEpoch() const override { return perEpoch_; }
  int64_t position() const override { return position_; }

  llvm::Error next(Batch &out) override {
    std::unique_lock<std::mutex> lock(mutex_);
    produced_.wait(lock, [&] { return !queue_.empty() || failed_; });
    if (queue_.empty()) // the thread failed at this position
      return dataError(error_);
    out = std::move(queue_.front());
    queue_.pop_front();
    ++position_;
    consumed_.notify_one();
    return llvm::Error::success();
  }

  void restrictRows(const std::string &name, RowRange rows) override {
    // Batches read ahead have every row: read them again.
    stop();
    queue_.clear();
    failed_ = false;
    error_.clear();
    inner_->restrictRows(name, rows);
    if (llvm::Error err = inner_->seek(position_)) {
      failed_ = true;
      error_ = llvm::toString(std::move(err));
      return;
    }
    start();
  }

  llvm::Error seek(int64_t step) override {
    stop();
    queue_.clear();
    failed_ = false;
    error_.clear();
    if (llvm::Error err = inner_->seek(step)) {
      // The thread had moved `inner` ahead of the consumer: put it back
      // where the consumer is, so a failed seek changes nothing.
      if (llvm::Error restore = inner_->seek(position_)) {
        failed_ = true;
        error_ = llvm::toString(std::move(restore));
        return err;
      }
      start();
      return err;
    }
    position_ = step;
    start();
    return llvm::Error::success();
  }

private:
  void start() {
    stopping_ = false;
    worker_ = std::thread([this] { run(); });
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    consumed_.notify_all();
    if (worker_.joinable())
      worker_.join();
  }

  void run() {
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        consumed_.wait(lock, [&] {
          return stopping_ || queue_.size() < static_cast<size_t>(depth_);
        });
        if (stopping_)
          return;
      }
      // Produce outside the lock so the consumer can take queued batches.
      Batch batch;
      std::string error;
      try {
        if (llvm::Error err = inner_->next(batch))
          error = llvm::toString(std::move(err));
      } catch (const std::bad_alloc &) {
        error = "out of memory while loading a batch";
      } catch (const std::exception &e) {
        error = std::string("loading a batch failed: ") + e.what();
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error.empty()) {
        failed_ = true;
        error_ = std::move(error);
        produced_.notify_all();
        return;
      }
      queue_.push_back(std::move(batch));
      produced_.notify_all();
    }
  }

  std::unique_ptr<BatchSource> inner_;
  int depth_;
  std::optional<int64_t> perEpoch_ = inner_->batchesPerEpoch();
  int64_t position_; // consumer's position (only the consumer touches it)

  std::mutex mutex_;
  std::condition_variable produced_; // a batch or an error is ready
  std::condition_variable consumed_; // room in the queue, or stop
  std::deque<Batch> queue_;
  bool stopping_ = false;
  bool failed_ = false;
  std::string error_;
  std::thread worker_;
};

} // namespace

std::unique_ptr<BatchSource>
makePrefetchingSource(std::unique_ptr<BatchSource> inner, int depth) {
  return std::make_unique<PrefetchingSource>(std::move(inner), depth);
}

} // namespace mgc::runtime
