// impls/cuda/runtime.h — the CUDA runtime, cuBLAS and the 16-bit float types;
// or, with CONFORM_CUDA_EMU, their CPU emulation (emu/cuda_emu.h) so the same
// kernels can be tested where there is no GPU.
#pragma once

#ifdef CONFORM_CUDA_EMU
#include "cuda/emu/cuda_emu.h"
#else
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
// Dynamic shared memory as raw bytes: one declaration for every template
// instantiation (typed `extern __shared__` arrays of different types clash).
#define CONFORM_DYNAMIC_SHARED(name) extern __shared__ __align__(16) unsigned char name[]
#endif
