// gpurl_host.h: the CUDA built-ins a gpurl kernel uses, as plain C++, so one .cu also builds with g++.
//
// gpurl.cuh includes this when __CUDACC__ is not defined (nvcc and NVRTC define it). The host build
// (gpurl.kernels.cuda_c_host.HostCudaCModule) runs a launch block after block, in order:
//
// - block == 1: one thread per block on the calling thread; __syncthreads() is a no-op. A kernel written
//   in gpurl's phase model (threads stride over agents, a barrier between phases) then runs each phase
//   over all agents before the next: exactly the Numba CPU build's loop-by-loop order.
// - block > 1: one std::thread per CUDA thread, __syncthreads() a std::barrier, __shared__ variables
//   static (blocks run one at a time, so a static is per block). Checks strided loops and barriers.
//
// Not emulated: warp intrinsics (__shfl_sync, ...), dynamic shared memory, textures, cooperative groups.
// Transcendental functions come from <cmath> and differ from CUDA's in the last bits.
#pragma once

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <math.h>
#include <stdlib.h>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __shared__ static
#define __launch_bounds__(...)

struct gpurl_dim3 {
    unsigned int x = 0, y = 0, z = 0;
};

inline thread_local gpurl_dim3 threadIdx, blockIdx;
inline gpurl_dim3 blockDim, gridDim;

namespace gpurl_host {
inline thread_local std::barrier<>* block_barrier = nullptr;
}

inline void __syncthreads() {
    if (gpurl_host::block_barrier != nullptr) gpurl_host::block_barrier->arrive_and_wait();
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// CUDA's min/max overloads live in the global namespace and mix argument types by usual conversions.
#define GPURL_HOST_MINMAX(T)                                \
    inline T min(T a, T b) { return b < a ? b : a; }        \
    inline T max(T a, T b) { return a < b ? b : a; }
GPURL_HOST_MINMAX(int)
GPURL_HOST_MINMAX(unsigned int)
GPURL_HOST_MINMAX(long long)
GPURL_HOST_MINMAX(unsigned long long)
#undef GPURL_HOST_MINMAX

// Atomics (real threads run a block when block > 1).
// The value parameters do not take part in deduction: atomicAdd(&unsigned_count, 1) works as in CUDA.
template <class T> using gpurl_same = std::type_identity_t<T>;
template <class T> T atomicAdd(T* p, gpurl_same<T> v) { return std::atomic_ref<T>(*p).fetch_add(v); }
template <class T> T atomicSub(T* p, gpurl_same<T> v) { return std::atomic_ref<T>(*p).fetch_sub(v); }
template <class T> T atomicExch(T* p, gpurl_same<T> v) { return std::atomic_ref<T>(*p).exchange(v); }
template <class T> T atomicCAS(T* p, gpurl_same<T> expected, gpurl_same<T> desired) {
    std::atomic_ref<T>(*p).compare_exchange_strong(expected, desired);
    return expected;  // the old value, as CUDA returns it
}
template <class T> T atomicMax(T* p, gpurl_same<T> v) {
    std::atomic_ref<T> ref(*p);
    T old = ref.load();
    while (old < v && !ref.compare_exchange_weak(old, v)) {}
    return old;
}
template <class T> T atomicMin(T* p, gpurl_same<T> v) {
    std::atomic_ref<T> ref(*p);
    T old = ref.load();
    while (v < old && !ref.compare_exchange_weak(old, v)) {}
    return old;
}

namespace gpurl_host {

// Run body() as every thread of every block of a grid x block launch (x dimensions only).
template <class Body>
void launch(unsigned int grid, unsigned int block, Body&& body) {
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    for (unsigned int b = 0; b < grid; ++b) {
        if (block == 1) {
            blockIdx = {b, 0, 0};
            threadIdx = {0, 0, 0};
            body();
            continue;
        }
        std::barrier<> barrier(block);
        std::vector<std::thread> threads;
        threads.reserve(block);
        for (unsigned int t = 0; t < block; ++t) {
            threads.emplace_back([&barrier, &body, b, t] {
                blockIdx = {b, 0, 0};
                threadIdx = {t, 0, 0};
                block_barrier = &barrier;
                body();
                barrier.arrive_and_drop();  // a thread that returned no longer holds the others up
            });
        }
        for (std::thread& thread : threads) thread.join();
    }
    blockIdx = threadIdx = gpurl_dim3{};
}

// Call kernel with its arguments unpacked from args[] (one pointer per argument, as cuLaunchKernel takes).
template <class... P, std::size_t... I>
void call(void (*kernel)(P...), void** args, std::index_sequence<I...>) {
    kernel(*static_cast<std::remove_cv_t<P>*>(args[I])...);
}

template <class... P>
void run(void (*kernel)(P...), unsigned int grid, unsigned int block, void** args) {
    launch(grid, block, [&] { call(kernel, args, std::index_sequence_for<P...>{}); });
}

}  // namespace gpurl_host

// extern "C" void symbol(unsigned grid, unsigned block, void** args): a host launcher of kernel.
#define GPURL_HOST_KERNEL(symbol, kernel)                                            \
    extern "C" void symbol(unsigned int grid, unsigned int block, void** args) {     \
        gpurl_host::run(&kernel, grid, block, args);                                 \
    }
