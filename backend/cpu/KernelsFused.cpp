// `fused` (ir/FusedExpr.h): the expression over blocks of elements. Each
// block gathers its operands (through their broadcast strides) into
// compute-type buffers, runs every instruction over the whole block, and
// stores the last result once, so a chain reads and writes memory once
// instead of once per op; in f32 every value equals the unfused chain's.
#include "backend/cpu/Elem.h"
#include "backend/cpu/Kernels.h"

#include "ir/FusedExpr.h"

#include <type_traits>
#include <vector>

namespace mgc::backend::cpu {

namespace {

constexpr int64_t kBlock = 256;

// Elements [b, b + n) of the result's row-major order, read from `x`
// broadcast through `strides`, into `buf` in the compute type.
template <typename C>
void gather(const TensorRef &x, const std::vector<int64_t> &strides,
            const ir::Shape &shape, int64_t b, int64_t n,
            std::vector<int64_t> &index, C *buf) {
  visitFloat(x.dtype(), [&]<typename S>() {
    const S *src = x.as<S>();
    if (x.shape().empty()) {
      std::fill(buf, buf + n, static_cast<C>(Elem<S>::load(src[0])));
      return 0;
    }
    if (llvm::ArrayRef<int64_t>(x.shape()) == llvm::ArrayRef<int64_t>(shape)) {
      for (int64_t k = 0; k < n; ++k)
        buf[k] = static_cast<C>(Elem<S>::load(src[b + k]));
      return 0;
    }
    // The index of element b, then counted up.
    int64_t rest = b, offset = 0;
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      index[d] = rest % shape[d];
      rest /= shape[d];
      offset += index[d] * strides[d];
    }
    for (int64_t k = 0; k < n; ++k) {
      buf[k] = static_cast<C>(Elem<S>::load(src[offset]));
      for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
        offset += strides[d];
        if (++index[d] < shape[d])
          break;
        offset -= strides[d] * shape[d];
        index[d] = 0;
      }
    }
    return 0;
  });
}

template <typename C, typename Out>
void runFused(const KernelArgs &args, const ir::FusedExpr &expr) {
  const ir::Shape &shape = args.out.type->shape;
  std::vector<std::vector<int64_t>> strides;
  std::vector<const C *> direct;
  for (const TensorRef &in : args.in) {
    strides.push_back(ir::broadcastStrides(in.shape(), shape));
    constexpr ir::DType computeType =
        std::is_same_v<C, double> ? ir::DType::F64 : ir::DType::F32;
    bool whole = in.dtype() == computeType &&
                 llvm::ArrayRef<int64_t>(in.shape()) ==
                     llvm::ArrayRef<int64_t>(shape);
    direct.push_back(whole ? in.as<C>() : nullptr);
  }
  const int64_t rank = static_cast<int64_t>(shape.size());
  args.pool.parallelFor(
      args.out.size(), kElementGrain, [&](int64_t begin, int64_t end) {
        std::vector<C> regs(expr.instrs.size() * kBlock);
        std::vector<C> argBuf(2 * kBlock);
        std::vector<int64_t> index(rank);
        for (int64_t b = begin; b < end; b += kBlock) {
          int64_t n = std::min(kBlock, end - b);
          for (size_t j = 0; j < expr.instrs.size(); ++j) {
            const ir::FusedInstr &in = expr.instrs[j];
            const C *ptrs[2] = {nullptr, nullptr};
            for (size_t a = 0; a < in.args.size(); ++a) {
              const ir::FusedArg &arg = in.args[a];
              C *buf = argBuf.data() + a * kBlock;
              if (arg.kind == ir::FusedArg::Kind::Result) {
                ptrs[a] = regs.data() + arg.index * kBlock;
                continue;
              }
              if (arg.kind == ir::FusedArg::Kind::Literal) {
                std::fill(buf, buf + n, static_cast<C>(arg.value));
              } else if (const C *whole = direct[arg.index]) {
                // An operand of the result's shape in the compute type:
                // read where it is (the result is stored only after the
                // block's last instruction, so it may be this operand).
                ptrs[a] = whole + b;
                continue;
              } else {
                gather<C>(args.in[arg.index], strides[arg.index], shape, b,
                          n, index, buf);
              }
              ptrs[a] = buf;
            }
            ir::applyFusedBlock<C>(in.op, ptrs[0], ptrs[1],
                                   regs.data() + j * kBlock, n);
          }
          const C *last = regs.data() + (expr.instrs.size() - 1) * kBlock;
          Out *y = args.out.as<Out>() + b;
          for (int64_t k = 0; k < n; ++k)
            y[k] = Elem<Out>::store(static_cast<ComputeOf<Out>>(last[k]));
        }
      });
}

} // namespace

LogicalResult kernelFused(const KernelArgs &args) {
  std::string error;
  std::optional<ir::FusedExpr> expr = ir::FusedExpr::parse(
      args.op.attrs().getString("expr"),
      static_cast<int64_t>(args.in.size()), error);
  if (!expr)
    return args.fail("fused: " + error);
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    if constexpr (std::is_same_v<S, double>)
      runFused<double, S>(args, *expr);
    else
      runFused<float, S>(args, *expr);
    return success();
  });
}

} // namespace mgc::backend::cpu
