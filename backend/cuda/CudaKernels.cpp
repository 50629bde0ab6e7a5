// Op dispatch of the CUDA backend: attributes and shapes to launcher calls,
// every call checked (MGC_CUDA_CHECK names the call, the file and line, and
// the op at its source location).
#include "backend/cuda/CudaKernels.h"

#include "backend/CollectivePlan.h"
#include "backend/cuda/CudaCheck.h"
#include "backend/cuda/CudaKernelSupport.h"
#include "ir/AttentionShape.h"
#include "ir/FusedExpr.h"
#include "ir/Interpreter.h"
#include "ir/TargetModule.h"
#include "support/Random.h"

#include "llvm/ADT/SmallVector.h"

#include <cmath>

namespace mgc::backend::cuda {

static_assert(
    static_cast<int>(Dt::F32) == static_cast<int>(ir::DType::F32) &&
        static_cast<int>(Dt::BF16) == static_cast<int>(ir::DType::BF16) &&
        static_cast<int>(Dt::F16) == static_cast<int>(ir::DType::F16) &&
        static_cast<int>(Dt::F64) == static_cast<int>(ir::DType::F64) &&
        static_cast<int>(Dt::I32) == static_cast<int>(ir::DType::I32) &&
        static_cast<int>(Dt::I64) == static_cast<int>(ir::DType::I64),
    "Dt mirrors ir::DType");

static_assert(static_cast<int>(FusedCode::Add) ==
                      static_cast<int>(ir::FusedOp::Add) &&
                  static_cast<int>(FusedCode::TanhGrad) ==
                      static_cast<int>(ir::FusedOp::TanhGrad) &&
                  static_cast<int>(FusedCode::Neg) ==
                      static_cast<int>(ir::FusedOp::Neg) &&
                  static_cast<int>(FusedCode::Cos) ==
                      static_cast<int>(ir::FusedOp::Cos) &&
                  static_cast<int>(FusedCode::CastF64) ==
                      static_cast<int>(ir::FusedOp::CastF64),
              "FusedCode mirrors ir::FusedOp");

Dt toDt(ir::DType dtype) { return static_cast<Dt>(dtype); }

namespace {

using ir::OpKind;

llvm::SmallVector<int64_t, kMaxRank>
rowMajorStrides(llvm::ArrayRef<int64_t> shape) {
  llvm::SmallVector<int64_t, kMaxRank> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

Strided strided(llvm::ArrayRef<int64_t> shape,
                llvm::ArrayRef<int64_t> strides) {
  Strided s;
  s.rank = static_cast<int32_t>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    s.shape[d] = shape[d];
    s.strides[d] = strides[d];
  }
  return s;
}

LogicalResult gather(const CudaKernelArgs &args, int64_t base,
                     llvm::ArrayRef<int64_t> inStrides) {
  return CHECKED(launchGather(
      args.launch, args.in[0].data, base, strided(args.out.shape(), inStrides),
      args.out.data, static_cast<int>(ir::dtypeBytes(args.out.dtype()))));
}

ReduceShape reduceShape(const CudaKernelArgs &args, const ir::TensorType &in) {
  llvm::SmallVector<bool, kMaxRank> reduced(in.shape.size(), false);
  for (int64_t a : args.op.attrs().getInts("axes"))
    reduced[*ir::normalizeAxis(a, in.rank())] = true;
  auto strides = rowMajorStrides(in.shape);
  llvm::SmallVector<int64_t, kMaxRank> keptShape, keptStrides, redShape,
      redStrides;
  ReduceShape s;
  for (size_t d = 0; d < in.shape.size(); ++d) {
    if (reduced[d]) {
      redShape.push_back(in.shape[d]);
      redStrides.push_back(strides[d]);
      s.count *= in.shape[d];
    } else {
      keptShape.push_back(in.shape[d]);
      keptStrides.push_back(strides[d]);
      s.outputs *= in.shape[d];
    }
  }
  s.kept = strided(keptShape, keptStrides);
  s.reduced = strided(redShape, redStrides);
  return s;
}

LogicalResult unary(const CudaKernelArgs &args, Unary op) {
  return CHECKED(launchUnary(args.launch, op, toDt(args.out.dtype()),
                             args.in[0].data, args.out.data, args.out.size()));
}
LogicalResult binary(const CudaKernelArgs &args, Binary op) {
  return CHECKED(launchBinary(args.launch, op, toDt(args.out.dtype()),
                              args.in[0].data, args.in[1].data, args.out.data,
                              args.out.size()));
}

// -> out[]: the constant in the op's dtype.
LogicalResult kConstant(const CudaKernelArgs &args) {
  double value =
      ir::roundToDType(args.op.attrs().getFloat("value"), args.out.dtype());
  return CHECKED(
      launchFill(args.launch, args.out.data, toDt(args.out.dtype()), value, 1));
}

// x[s] -> out[s] in another dtype.
LogicalResult kCast(const CudaKernelArgs &args) {
  if (failed(CHECKED(launchCast(args.launch, args.in[0].data,
                                toDt(args.in[0].dtype()), args.out.data,
                                toDt(args.out.dtype()), args.out.size()))))
    return failure();
  return ir::isInteger(args.out.dtype()) ? noteValue(args, 0) : success();
}

// a[s], b[s] -> out[s]
LogicalResult kAdd(const CudaKernelArgs &a) { return binary(a, Binary::Add); }
LogicalResult kSub(const CudaKernelArgs &a) { return binary(a, Binary::Sub); }
LogicalResult kMul(const CudaKernelArgs &a) { return binary(a, Binary::Mul); }
LogicalResult kDiv(const CudaKernelArgs &a) {
  if (failed(binary(a, Binary::Div)))
    return failure();
  return ir::isInteger(a.out.dtype()) ? noteValue(a, 1) : success();
}
LogicalResult kMinimum(const CudaKernelArgs &a) {
  return binary(a, Binary::Minimum);
}
LogicalResult kMaximum(const CudaKernelArgs &a) {
  return binary(a, Binary::Maximum);
}
LogicalResult kReluGrad(const CudaKernelArgs &a) {
  return binary(a, Binary::ReluGrad);
}
LogicalResult kGeluGrad(const CudaKernelArgs &a) {
  return binary(a, Binary::GeluGrad);
}
LogicalResult kSigmoidGrad(const CudaKernelArgs &a) {
  return binary(a, Binary::SigmoidGrad);
}
LogicalResult kTanhGrad(const CudaKernelArgs &a) {
  return binary(a, Binary::TanhGrad);
}

// x[s] -> out[s]
LogicalResult kNeg(const CudaKernelArgs &a) { return unary(a, Unary::Neg); }
LogicalResult kExp(const CudaKernelArgs &a) { return unary(a, Unary::Exp); }
LogicalResult kLog(const CudaKernelArgs &a) { return unary(a, Unary::Log); }
LogicalResult kSqrt(const CudaKernelArgs &a) { return unary(a, Unary::Sqrt); }
LogicalResult kRsqrt(const CudaKernelArgs &a) { return unary(a, Unary::Rsqrt); }
LogicalResult kTanh(const CudaKernelArgs &a) { return unary(a, Unary::Tanh); }
LogicalResult kRelu(const CudaKernelArgs &a) { return unary(a, Unary::Relu); }
LogicalResult kGelu(const CudaKernelArgs &a) { return unary(a, Unary::Gelu); }
LogicalResult kSigmoid(const CudaKernelArgs &a) {
  return unary(a, Unary::Sigmoid);
}
LogicalResult kCos(const CudaKernelArgs &a) { return unary(a, Unary::Cos); }

// Up to three operands of the result's type -> out[s] (KernelsMath.cu).
LogicalResult math(const CudaKernelArgs &args, MathOp op) {
  auto operand = [&](size_t i) -> const void * {
    return i < args.in.size() ? args.in[i].data : nullptr;
  };
  return CHECKED(launchMath(args.launch, op, toDt(args.out.dtype()), operand(0),
                            operand(1), operand(2), args.out.data,
                            args.out.size()));
}
LogicalResult kSin(const CudaKernelArgs &a) { return math(a, MathOp::Sin); }
LogicalResult kAbs(const CudaKernelArgs &a) { return math(a, MathOp::Abs); }
LogicalResult kSign(const CudaKernelArgs &a) { return math(a, MathOp::Sign); }
LogicalResult kSoftplus(const CudaKernelArgs &a) {
  return math(a, MathOp::Softplus);
}
LogicalResult kPow(const CudaKernelArgs &a) { return math(a, MathOp::Pow); }
LogicalResult kMinMaxGrad(const CudaKernelArgs &a) {
  return math(a, a.op.attrs().getBool("maximum") ? MathOp::MaxGrad
                                                 : MathOp::MinGrad);
}
// cond[s] (any element type), a[s], b[s] -> out[s]
LogicalResult kWhere(const CudaKernelArgs &args) {
  return CHECKED(launchMath(args.launch, MathOp::Where, toDt(args.out.dtype()),
                            args.in[0].data, args.in[1].data, args.in[2].data,
                            args.out.data, args.out.size(),
                            toDt(args.in[0].dtype())));
}
// -> out[shape]: each element's index along `axis`.
LogicalResult kIota(const CudaKernelArgs &args) {
  const ir::TensorType &t = *args.out.type;
  int64_t axis = *ir::normalizeAxis(args.op.attrs().getInt("axis"), t.rank());
  ir::AxisSplit s = ir::splitAtAxis(t.shape, axis);
  return CHECKED(launchIota(args.launch, toDt(args.out.dtype()), args.out.data,
                            args.out.size(), s.inner, s.dim));
}

// x[s] -> out[s] with the CPU's counter-based mask.
LogicalResult kDropout(const CudaKernelArgs &args) {
  double p = args.op.attrs().getFloat("p");
  uint64_t seed = static_cast<uint64_t>(args.op.attrs().getInt("seed"));
  return CHECKED(launchDropout(args.launch, toDt(args.out.dtype()),
                               args.in[0].data, args.out.data, args.out.size(),
                               p, seed, hashName("dropout")));
}

// x[rows, ...] (rows `part` of the whole tensor's first dimension) -> out
// with the whole tensor's mask at this part's elements.
LogicalResult kDropoutPart(const CudaKernelArgs &args) {
  double p = args.op.attrs().getFloat("p");
  uint64_t seed = static_cast<uint64_t>(args.op.attrs().getInt("seed"));
  int64_t rows = args.in[0].shape().empty() ? 1 : args.in[0].shape()[0];
  std::string error;
  std::optional<IndexPart> part =
      planIndexPart(args.op, args.comm, rows, error);
  if (!part)
    return fail(args, error);
  int64_t perRow = rows > 0 ? args.in[0].size() / rows : 0;
  return CHECKED(launchDropout(args.launch, toDt(args.out.dtype()),
                               args.in[0].data, args.out.data, args.out.size(),
                               p, seed, hashName("dropout"),
                               static_cast<uint64_t>(part->begin * perRow)));
}

// a[..., M, K] @ b[K, N] or b[..., K, N] -> c[..., M, N]
LogicalResult kMatmul(const CudaKernelArgs &args) {
  return args.matmul->run(args.in[0].data, args.in[1].data, args.out.data,
                          args.workspace, args.launch.stream, args.diag);
}

// x[s] -> out[s]: the same bytes.
LogicalResult kReshape(const CudaKernelArgs &args) {
  size_t bytes =
      static_cast<size_t>(args.out.size()) * ir::dtypeBytes(args.out.dtype());
  if (bytes == 0)
    return success();
  return CHECKED(cudaMemcpyAsync(args.out.data, args.in[0].data, bytes,
                                 cudaMemcpyDeviceToDevice, args.launch.stream));
}

// x[s] -> out[t], t[i] = s[perm[i]].
LogicalResult kTranspose(const CudaKernelArgs &args) {
  const ir::TensorType &in = *args.in[0].type;
  auto inStrides = rowMajorStrides(in.shape);
  llvm::SmallVector<int64_t, kMaxRank> strides;
  for (int64_t p : args.op.attrs().getInts("perm"))
    strides.push_back(inStrides[*ir::normalizeAxis(p, in.rank())]);
  return gather(args, 0, strides);
}

// x[..., d, ...] -> out[..., end - start, ...]
LogicalResult kSlice(const CudaKernelArgs &args) {
  const ir::TensorType &in = *args.in[0].type;
  int64_t axis = *ir::normalizeAxis(args.op.attrs().getInt("axis"), in.rank());
  auto strides = rowMajorStrides(in.shape);
  return gather(args, args.op.attrs().getInt("start") * strides[axis], strides);
}

// x_k[..., d_k, ...] -> out[..., sum d_k, ...]: one 2-D copy per operand.
LogicalResult kConcat(const CudaKernelArgs &args) {
  const ir::TensorType &outType = *args.out.type;
  int64_t axis =
      *ir::normalizeAxis(args.op.attrs().getInt("axis"), outType.rank());
  int64_t elem = ir::dtypeBytes(outType.dtype);
  auto [outer, dim, inner] = ir::splitAtAxis(outType.shape, axis);
  int64_t outRow = dim * inner * elem;
  int64_t offset = 0;
  for (const DeviceTensor &t : args.in) {
    int64_t chunk = t.shape()[axis] * inner * elem;
    if (chunk > 0 && outer > 0 &&
        failed(CHECKED(cudaMemcpy2DAsync(
            static_cast<std::byte *>(args.out.data) + offset,
            static_cast<size_t>(outRow), t.data, static_cast<size_t>(chunk),
            static_cast<size_t>(chunk), static_cast<size_t>(outer),
            cudaMemcpyDeviceToDevice, args.launch.stream))))
      return failure();
    offset += chunk;
  }
  return success();
}

// x[s] -> out[shape]: size-1 and missing axes read with stride 0.
LogicalResult kBroadcast(const CudaKernelArgs &args) {
  const ir::TensorType &in = *args.in[0].type;
  llvm::ArrayRef<int64_t> outShape = args.out.shape();
  auto inStrides = rowMajorStrides(in.shape);
  int64_t lead = static_cast<int64_t>(outShape.size()) - in.rank();
  llvm::SmallVector<int64_t, kMaxRank> strides(outShape.size(), 0);
  for (int64_t d = lead; d < static_cast<int64_t>(outShape.size()); ++d)
    if (in.shape[d - lead] != 1)
      strides[d] = inStrides[d - lead];
  return gather(args, 0, strides);
}

LogicalResult reduce(const CudaKernelArgs &args, Reduce kind) {
  const ir::TensorType &inType = *args.in[0].type;
  ReduceShape s = reduceShape(args, inType);
  if (kind == Reduce::Max && s.count == 0 && s.outputs > 0)
    return fail(args,
                "max over an empty axis of " + inType.str() + " has no value");
  return CHECKED(launchReduce(args.launch, kind, toDt(args.out.dtype()),
                              args.in[0].data, args.out.data, s));
}
LogicalResult kSum(const CudaKernelArgs &a) { return reduce(a, Reduce::Sum); }
LogicalResult kMean(const CudaKernelArgs &a) { return reduce(a, Reduce::Mean); }
LogicalResult kMax(const CudaKernelArgs &a) { return reduce(a, Reduce::Max); }

// dy[r], x[s], y[r] -> dx[s]
LogicalResult kMaxGrad(const CudaKernelArgs &args) {
  ReduceShape s = reduceShape(args, *args.in[1].type);
  return CHECKED(launchMaxGrad(args.launch, toDt(args.out.dtype()),
                               args.in[0].data, args.in[1].data,
                               args.in[2].data, args.out.data, s));
}

// operands broadcast to `shape` -> out[shape]: the expression, one thread
// per element.
LogicalResult kFused(const CudaKernelArgs &args) {
  std::string error;
  std::optional<ir::FusedExpr> expr =
      ir::FusedExpr::parse(args.op.attrs().getString("expr"),
                           static_cast<int64_t>(args.in.size()), error);
  if (!expr)
    return fail(args, "fused: " + error);
  FusedProgram p;
  p.numInstrs = static_cast<int32_t>(expr->instrs.size());
  p.numOperands = static_cast<int32_t>(args.in.size());
  for (size_t j = 0; j < expr->instrs.size(); ++j) {
    const ir::FusedInstr &in = expr->instrs[j];
    p.op[j] = static_cast<FusedCode>(in.op);
    p.argKind[j][0] = p.argKind[j][1] = 2; // unused: a literal 0, no load
    for (size_t a = 0; a < in.args.size() && a < 2; ++a) {
      const ir::FusedArg &arg = in.args[a];
      p.argKind[j][a] = arg.kind == ir::FusedArg::Kind::Operand  ? 0
                        : arg.kind == ir::FusedArg::Kind::Result ? 1
                                                                 : 2;
      p.argIndex[j][a] = static_cast<int32_t>(arg.index);
      p.literal[j][a] = arg.value;
    }
  }
  llvm::ArrayRef<int64_t> shape = args.out.shape();
  p.rank = static_cast<int32_t>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d)
    p.shape[d] = shape[d];
  for (size_t k = 0; k < args.in.size(); ++k) {
    p.operand[k] = args.in[k].data;
    p.operandDt[k] = toDt(args.in[k].dtype());
    std::vector<int64_t> strides =
        ir::broadcastStrides(args.in[k].shape(), shape);
    for (size_t d = 0; d < strides.size() && d < kMaxRank; ++d)
      p.strides[k][d] = strides[d];
  }
  return CHECKED(launchFused(args.launch, p, toDt(args.out.dtype()),
                             args.out.data, args.out.size()));
}

// a[..., M, K] @ b, then the epilogue (bias[N] or h[..., M, N] in operand
// 2): cuBLASLt's part in the GEMM, the rest (MatmulPlan::after()) as a
// fused expression in place on the result, rounding a 16-bit result after
// the bias as the unfused add stores it.
LogicalResult kMatmulEpilogue(const CudaKernelArgs &args) {
  if (!args.matmul)
    return fail(args, "matmul_epilogue has no cuBLASLt plan (the executor "
                      "made none: internal error)");
  const DeviceTensor &extra = args.in[2];
  if (failed(args.matmul->run(args.in[0].data, args.in[1].data, extra.data,
                              args.out.data, args.workspace, args.launch.stream,
                              args.diag)))
    return failure();
  EpilogueAfter after = args.matmul->after();
  ir::DType dt = args.out.dtype();
  bool half = dt == ir::DType::BF16 || dt == ir::DType::F16;
  FusedProgram p;
  auto instr = [&](FusedCode code,
                   std::initializer_list<std::pair<int, int>> argsOf) {
    int j = p.numInstrs++;
    p.op[j] = code;
    p.argKind[j][0] = p.argKind[j][1] = 2; // unused: a literal 0
    int a = 0;
    for (auto [kind, index] : argsOf) {
      p.argKind[j][a] = static_cast<uint8_t>(kind);
      p.argIndex[j][a] = index;
      ++a;
    }
    return j;
  };
  // %0 is the GEMM's result (read and written in place: each thread reads
  // its own element first), %1 the bias or h.
  switch (after) {
  case EpilogueAfter::Bias:
    instr(FusedCode::Add, {{0, 0}, {0, 1}});
    break;
  case EpilogueAfter::BiasGelu: {
    int j = instr(FusedCode::Add, {{0, 0}, {0, 1}});
    if (half)
      j = instr(dt == ir::DType::BF16 ? FusedCode::CastBF16
                                      : FusedCode::CastF16,
                {{1, j}});
    instr(FusedCode::Gelu, {{1, j}});
    break;
  }
  case EpilogueAfter::Gelu:
    instr(FusedCode::Gelu, {{0, 0}});
    break;
  case EpilogueAfter::GeluGrad:
    instr(FusedCode::GeluGrad, {{0, 0}, {0, 1}});
    break;
  case EpilogueAfter::None:
    break;
  }
  llvm::ArrayRef<int64_t> shape = args.out.shape();
  p.rank = static_cast<int32_t>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d)
    p.shape[d] = shape[d];
  p.numOperands = 2;
  const DeviceTensor *operands[2] = {&args.out, &extra};
  for (int k = 0; k < 2; ++k) {
    p.operand[k] = operands[k]->data;
    p.operandDt[k] = toDt(dt);
    std::vector<int64_t> strides =
        ir::broadcastStrides(operands[k]->shape(), shape);
    for (size_t d = 0; d < strides.size() && d < kMaxRank; ++d)
      p.strides[k][d] = strides[d];
  }
  return CHECKED(
      launchFused(args.launch, p, toDt(dt), args.out.data, args.out.size()));
}

} // namespace

CudaKernelFn cudaKernelFor(ir::OpKind kind) {
  switch (kind) {
  case OpKind::Constant:
    return kConstant;
  case OpKind::Cast:
    return kCast;
  case OpKind::Add:
    return kAdd;
  case OpKind::Sub:
    return kSub;
  case OpKind::Mul:
    return kMul;
  case OpKind::Div:
    return kDiv;
  case OpKind::Neg:
    return kNeg;
  case OpKind::Exp:
    return kExp;
  case OpKind::Log:
    return kLog;
  case OpKind::Sqrt:
    return kSqrt;
  case OpKind::Rsqrt:
    return kRsqrt;
  case OpKind::Tanh:
    return kTanh;
  case OpKind::Relu:
    return kRelu;
  case OpKind::Gelu:
    return kGelu;
  case OpKind::Sigmoid:
    return kSigmoid;
  case OpKind::Dropout:
    return kDropout;
  case OpKind::DropoutPart:
    return kDropoutPart;
  case OpKind::Matmul:
    return kMatmul;
  case OpKind::Reshape:
  case OpKind::ModeSelect: // a training step's: the train operand
    return kReshape;
  case OpKind::Transpose:
    return kTranspose;
  case OpKind::Slice:
    return kSlice;
  case OpKind::Concat:
    return kConcat;
  case OpKind::Broadcast:
    return kBroadcast;
  case OpKind::Sum:
    return kSum;
  case OpKind::Mean:
    return kMean;
  case OpKind::Max:
    return kMax;
  case OpKind::ReluGrad:
    return kReluGrad;
  case OpKind::GeluGrad:
    return kGeluGrad;
  case OpKind::SigmoidGrad:
    return kSigmoidGrad;
  case OpKind::TanhGrad:
    return kTanhGrad;
  case OpKind::MaxGrad:
    return kMaxGrad;
  case OpKind::Cos:
    return kCos;
  case OpKind::Minimum:
    return kMinimum;
  case OpKind::Maximum:
    return kMaximum;
  case OpKind::Sin:
    return kSin;
  case OpKind::Abs:
    return kAbs;
  case OpKind::Sign:
    return kSign;
  case OpKind::Softplus:
    return kSoftplus;
  case OpKind::Pow:
    return kPow;
  case OpKind::Where:
    return kWhere;
  case OpKind::Iota:
    return kIota;
  case OpKind::MinMaxGrad:
    return kMinMaxGrad;
  case OpKind::Fused:
    return kFused;
  case OpKind::MatmulEpilogue:
    return kMatmulEpilogue;
  default:
    if (CudaKernelFn nn = cudaNNKernelFor(kind))
      return nn;
    if (CudaKernelFn vocab = cudaVocabKernelFor(kind))
      return vocab;
    return cudaCollectiveKernelFor(kind);
  }
}

std::string cudaUnsupported(const ir::Op &op) {
  if (std::string why = ir::exceedsTarget(op, ir::kCudaTarget); !why.empty())
    return why;
  if (!cudaKernelFor(op.kind()))
    return "op '" + op.name().str() +
           "' is not supported on the CUDA backend yet";
  if (op.kind() == OpKind::Matmul && ir::isInteger(op.type().dtype))
    return "integer matmul is not supported on the CUDA backend yet";
  return "";
}

uint64_t cudaScratchBytes(const ir::Op &op) {
  if (op.kind() == OpKind::AttentionGrad)
    return attentionGradScratch(ir::attentionDims(op));
  if (op.kind() == OpKind::CrossEntropy)
    return static_cast<uint64_t>(op.operand(1)->type().size()) * sizeof(double);
  return collectiveScratchBytes(op);
}

std::string describeDeviceError(const ir::Op &op, uint32_t code,
                                int64_t element, int64_t intValue,
                                double realValue) {
  std::string at = " in element " + std::to_string(element);
  switch (code) {
  case kIdOutOfRange: {
    int64_t limit = 0;
    const char *what = "id";
    switch (op.kind()) {
    case OpKind::Embedding:
      limit = op.operand(0)->type().shape[0];
      what = "embedding id";
      break;
    case OpKind::EmbeddingGrad:
      limit = op.type().shape[0];
      what = "embedding_grad id";
      break;
    case OpKind::CrossEntropy:
      limit = op.operand(0)->type().shape.back();
      what = "cross_entropy target";
      break;
    case OpKind::CrossEntropyGrad:
      limit = op.operand(1)->type().shape.back();
      what = "cross_entropy_grad target";
      break;
    case OpKind::EmbeddingPart:
    case OpKind::EmbeddingGradPart:
    case OpKind::ClassLogit:
    case OpKind::CrossEntropyGradStats: {
      // The whole dimension, of which the device holds a part.
      const std::vector<int64_t> &sizes = op.attrs().getInts("sizes");
      for (int64_t n : sizes)
        limit += n;
      if (sizes.empty()) // the logical op: its logits' classes
        limit = op.operand(op.kind() == OpKind::ClassLogit ? 0 : 1)
                    ->type()
                    .shape.back();
      what = op.kind() == OpKind::EmbeddingPart       ? "embedding_part id"
             : op.kind() == OpKind::EmbeddingGradPart ? "embedding_grad_part id"
             : op.kind() == OpKind::ClassLogit        ? "class_logit target"
                                               : "cross_entropy_grad_stats "
                                                 "target";
      break;
    }
    default:
      break;
    }
    return std::string(what) + " " + std::to_string(intValue) +
           " is out of range [0, " + std::to_string(limit) + ")" + at;
  }
  case kDivisionByZero:
    return "integer division by zero" + at;
  case kCastOutOfRange:
    return "cast of " + ir::formatDouble(realValue) + " to " +
           ir::dtypeName(op.type().dtype).str() + " is out of range" + at;
  default:
    return "unknown device error " + std::to_string(code) + at;
  }
}

} // namespace mgc::backend::cuda
