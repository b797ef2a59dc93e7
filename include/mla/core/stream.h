#pragma once
// The CUDA stream type without pulling CUDA headers into host-only code (same type as cudaStream_t).
struct CUstream_st;
namespace mla {
using Stream = CUstream_st*;
}
