// Why: kernel math is written once and compiled for both the CPU and CUDA.
// LONGCTX_HD marks a function usable from host and device code; this header
// includes no CUDA header so CPU-only builds never need the toolkit.
#ifndef LONGCTX_KERNELS_MATH_HD_H_
#define LONGCTX_KERNELS_MATH_HD_H_

#if defined(__CUDACC__)
#define LONGCTX_HD __host__ __device__ __forceinline__
#else
#define LONGCTX_HD inline
#endif

#endif  // LONGCTX_KERNELS_MATH_HD_H_
