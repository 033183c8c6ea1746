// The CUDA that cuda/engine/ uses, on the CPU, for its tests (emulated.rs): a block's threads are
// OS threads (one each, a block at a time), __syncthreads a barrier of the block, a warp's
// shuffle an exchange through memory between two barriers of the warp, static __shared__ arrays
// plain statics (one block runs at a time, so one copy serves). Correctness only: it checks the
// kernels' arithmetic, indexing and synchronisation against the CPU engine, not their speed; a
// kernel that reads another thread's shared or global writes without a barrier between may still
// pass here, which the parity test on a card then catches.
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <math.h>
#include <memory>
#include <thread>
#include <vector>

struct uint3 {
    unsigned x, y, z;
};
inline thread_local uint3 threadIdx, blockIdx, blockDim, gridDim;

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static

namespace emu {
struct Block {
    std::unique_ptr<std::barrier<>> all;
    std::vector<std::unique_ptr<std::barrier<>>> warps;
    std::vector<uint64_t> exchange;
};
inline Block* block = nullptr;
inline thread_local unsigned tid = 0;
}  // namespace emu

inline void __syncthreads() { emu::block->all->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::block->warps[emu::tid / 32]->arrive_and_wait(); }

template <class T>
inline T __shfl_xor_sync(unsigned, T v, int lane_mask) {
    static_assert(sizeof(T) <= 8);
    unsigned me = emu::tid, other = me ^ (unsigned)lane_mask;
    std::memcpy(&emu::block->exchange[me], &v, sizeof(T));
    __syncwarp();
    T r;
    std::memcpy(&r, &emu::block->exchange[other], sizeof(T));
    __syncwarp();
    return r;
}

inline float __int_as_float(int i) {
    float f;
    std::memcpy(&f, &i, sizeof f);
    return f;
}
inline unsigned __float_as_uint(float f) {
    unsigned u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}
inline int min(int a, int b) { return a < b ? a : b; }

namespace emu {
// Runs `body` as the kernel over the grid, a block at a time, blockDim.x threads a block (a
// multiple of 32): one OS thread per CUDA thread for the whole launch, each taking every block in
// turn (spawning them per block cost most of an emulated step). A thread that returns leaves its
// block's and its warp's barriers, as an exited thread stops counting on a GPU; between blocks all
// threads meet, and the first sets up the next block's barriers.
template <class F>
void run(uint3 grid, unsigned threads, F body) {
    unsigned warps = (threads + 31) / 32;
    Block b;
    auto fresh = [&] {
        b.all = std::make_unique<std::barrier<>>(threads);
        b.warps.clear();
        for (unsigned w = 0; w < warps; w++)
            b.warps.push_back(std::make_unique<std::barrier<>>(32));
    };
    fresh();
    b.exchange.assign(threads, 0);
    block = &b;
    std::barrier<> between(threads);
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; t++)
        pool.emplace_back([&, t] {
            threadIdx = {t, 0, 0};
            blockDim = {threads, 1, 1};
            gridDim = grid;
            tid = t;
            for (unsigned z = 0; z < grid.z; z++)
                for (unsigned y = 0; y < grid.y; y++)
                    for (unsigned x = 0; x < grid.x; x++) {
                        blockIdx = {x, y, z};
                        body();
                        b.warps[t / 32]->arrive_and_drop();
                        b.all->arrive_and_drop();
                        between.arrive_and_wait();
                        if (t == 0) fresh();
                        between.arrive_and_wait();
                    }
        });
    for (auto& th : pool) th.join();
    block = nullptr;
}
}  // namespace emu
