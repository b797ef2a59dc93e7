#pragma once
// MLA_HD marks code shared by the CPU references and the CUDA kernels (page-table view, FP8 codec,
// decode plan): one definition, so the two backends cannot drift apart.
#if defined(__CUDACC__)
#define MLA_HD __host__ __device__
#define MLA_HD_INLINE __host__ __device__ __forceinline__
#else
#define MLA_HD
#define MLA_HD_INLINE inline
#endif
