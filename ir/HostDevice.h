// MGC_HOST_DEVICE marks the inline functions of the headers that nvcc
// compiles into the CUDA kernels as well as into host code
// (ir/AttentionDims.h, ir/WindowDims.h).
#pragma once

#if defined(__CUDACC__)
#define MGC_HOST_DEVICE __host__ __device__
#else
#define MGC_HOST_DEVICE
#endif
