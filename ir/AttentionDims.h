// The index arithmetic of attention, shared by the interpreter, the CPU
// kernels and the CUDA kernels, so that all three agree on which keys a
// query sees, which key/value head it reads and where its mask entries are.
// Plain data and inline functions only (nvcc compiles this header into the
// kernels); ir/AttentionShape.h builds it from the op's types.
//
// attention(q, k, v[, mask]) {causal}:
//   q     [L..., H, Tq, Dh]   the leading axes L... (batch) and the heads are
//   k, v  [L..., Hkv, Tk, Dh] flattened: query head h reads key/value head
//                             h / (H / Hkv) (grouped-query attention; with
//                             H = Hkv, head h)
//   mask  broadcasts to [L..., H, Tq, Tk], added to the scaled scores
// With `causal`, query i sees keys j <= i + Tk - Tq: the query rows are the
// last Tq positions of the Tk keys (FlashAttention's bottom-right alignment,
// what a decoder with a key/value cache needs; the usual mask when Tq = Tk).
#pragma once

#include "ir/HostDevice.h"

#include <cstdint>

namespace mgc::ir {

struct AttentionDims {
  // Leading axes of q (everything before its last two) that a mask may
  // broadcast over.
  static constexpr int kMaxLead = 8;

  int64_t heads = 0; // query heads: the product of q's leading axes
  int64_t group = 1; // query heads per key/value head
  int64_t tq = 0, tk = 0, dh = 0;
  bool causal = true;

  // The mask's layout: a stride per leading axis of q, per query row and per
  // key (0 where the mask has size 1 and broadcasts).
  bool masked = false;
  int lead = 0;
  int64_t leadShape[kMaxLead] = {};
  int64_t maskLeadStride[kMaxLead] = {};
  int64_t maskRowStride = 0, maskColStride = 0;

  MGC_HOST_DEVICE int64_t kvHeads() const { return heads / group; }
  MGC_HOST_DEVICE int64_t kvHead(int64_t h) const { return h / group; }

  // Offsets of row i of query head h in q (and y, dy), and of row j of the
  // key/value head that query head h reads in k and v.
  MGC_HOST_DEVICE int64_t qRowOffset(int64_t h, int64_t i) const {
    return (h * tq + i) * dh;
  }
  MGC_HOST_DEVICE int64_t kvRowOffset(int64_t h, int64_t j) const {
    return (kvHead(h) * tk + j) * dh;
  }

  // attention_grad's result [L..., H, Tq + 2 Tk, Dh]: per query head, the
  // rows of dq, then of that head's dk and dv. Offsets of row i of dq and
  // row j of dk and dv of query head h.
  MGC_HOST_DEVICE int64_t gradRows() const { return tq + 2 * tk; }
  MGC_HOST_DEVICE int64_t dqRowOffset(int64_t h, int64_t i) const {
    return (h * gradRows() + i) * dh;
  }
  MGC_HOST_DEVICE int64_t dkRowOffset(int64_t h, int64_t j) const {
    return (h * gradRows() + tq + j) * dh;
  }
  MGC_HOST_DEVICE int64_t dvRowOffset(int64_t h, int64_t j) const {
    return (h * gradRows() + tq + tk + j) * dh;
  }

  // Keys [0, keyEnd(i)) are visible to query row i (none when it is <= 0).
  MGC_HOST_DEVICE int64_t keyEnd(int64_t i) const {
    if (!causal)
      return tk;
    int64_t end = i + 1 + tk - tq;
    return end < 0 ? 0 : (end > tk ? tk : end);
  }
  // Query rows [rowBegin(j), tq) see key j.
  MGC_HOST_DEVICE int64_t rowBegin(int64_t j) const {
    if (!causal)
      return 0;
    int64_t begin = j - (tk - tq);
    return begin < 0 ? 0 : begin;
  }
  MGC_HOST_DEVICE bool visible(int64_t i, int64_t j) const {
    return !causal || j <= i + tk - tq;
  }

  // Offset of the mask entry of query head h at (0, 0).
  MGC_HOST_DEVICE int64_t maskBase(int64_t h) const {
    int64_t offset = 0;
    for (int a = lead - 1; a >= 0; --a) {
      offset += (h % leadShape[a]) * maskLeadStride[a];
      h /= leadShape[a];
    }
    return offset;
  }
  MGC_HOST_DEVICE int64_t maskAt(int64_t base, int64_t i, int64_t j) const {
    return base + i * maskRowStride + j * maskColStride;
  }
};

} // namespace mgc::ir
