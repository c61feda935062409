// gpurl.cuh: what a CUDA C env kernel over gpurl buffers includes (on the include path of every
// gpurl.kernels.cuda_c build).
//
// - Under nvcc/NVRTC this is plain CUDA; compiled as C++ (no __CUDACC__) it pulls in gpurl_host.h, so
//   the same source also builds with g++ and runs on CPU tensors (HostCudaCModule), e.g. in the cpu tier.
// - The counter-based RNG of gpurl.kernels.rng, bit for bit: a draw is a pure hash of its key
//   (seed, global env id, agent, counter, stream), so a CUDA C env draws exactly what its Numba twin
//   draws. All arithmetic is unsigned 64-bit; keys are taken modulo 2**32 like the Python version.
#pragma once

#ifndef __CUDACC__
#include "gpurl_host.h"
#endif

// SplitMix64's finaliser: a bijective avalanche of one uint64 (gpurl.kernels.rng.mix64).
__device__ __forceinline__ unsigned long long gpurl_mix64(unsigned long long z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// Two 32-bit key parts in one word: (hi mod 2**32) << 32 | (lo mod 2**32). Negative keys wrap as
// np.uint64 does (two's complement), then the mask keeps the low 32 bits.
__device__ __forceinline__ unsigned long long gpurl_key_pair(long long hi, long long lo) {
    const unsigned long long mask = 0xFFFFFFFFULL;
    return ((static_cast<unsigned long long>(hi) & mask) << 32) | (static_cast<unsigned long long>(lo) & mask);
}

// uint32 draw for the key (gpurl.kernels.rng.random_u32).
__device__ __forceinline__ unsigned int gpurl_random_u32(unsigned long long seed, long long env, long long agent,
                                                         long long counter, long long stream) {
    unsigned long long h = gpurl_mix64(seed + 0x9E3779B97F4A7C15ULL);
    h = gpurl_mix64(h ^ gpurl_key_pair(env, agent));
    h = gpurl_mix64(h ^ gpurl_key_pair(counter, stream));
    return static_cast<unsigned int>(h >> 32);
}

// float32 uniform on [0, 1) with 24 random bits (gpurl.kernels.rng.random_uniform; exact, never 1).
__device__ __forceinline__ float gpurl_random_uniform(unsigned long long seed, long long env, long long agent,
                                                      long long counter, long long stream) {
    const unsigned int h = gpurl_random_u32(seed, env, agent, counter, stream);
    return static_cast<float>(h >> 8) * (1.0f / 16777216.0f);
}

// Integer in [0, n) by multiply-shift (gpurl.kernels.rng.random_below; n >= 1, small).
__device__ __forceinline__ int gpurl_random_below(unsigned long long seed, long long env, long long agent,
                                                  long long counter, long long stream, long long n) {
    const unsigned long long h = gpurl_random_u32(seed, env, agent, counter, stream);
    return static_cast<int>((h * static_cast<unsigned long long>(n)) >> 32);
}
