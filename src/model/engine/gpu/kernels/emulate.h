// The CUDA that gpu/kernels/ uses, on the CPU, for its tests (emulated.rs): a block's threads are
// fibers (fiber.h) on the launching OS thread, run in turn by a scheduler, each until it waits
// at a barrier or returns; __syncthreads is a barrier of the block, a warp's shuffle an exchange
// through memory between two barriers of the warp, static __shared__ arrays plain statics (one
// block runs at a time, so one copy serves). Fibers, not an OS thread a CUDA thread: with 256
// threads a block on two cores, every barrier cost a storm of futex wake-ups and context switches
// (an emulated MNR step 16.6 s, 12.7 of them in the kernel's scheduler). Correctness only: it
// checks the kernels' arithmetic, indexing and synchronisation against the CPU engine, not their
// speed; a kernel that reads another thread's shared or global writes without a barrier between
// may still pass here, which the parity test on a card then catches. A barrier that can never
// complete (some threads wait at __syncthreads while the rest returned or wait at another) is a
// hang on a card; here it aborts with the kernel's state.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include "fiber.h"
#include <math.h>
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
// A barrier among a block's fibers: the phase ends when every member still running has arrived.
struct Bar {
    unsigned expected = 0, arrived = 0;
    uint64_t phase = 0;
    void release() {
        arrived = 0;
        phase++;
    }
};
struct Fiber {
    fiber::Context ctx;
    const Bar* waits = nullptr;  // the barrier it waits at (null: runnable) ...
    uint64_t phase = 0;          // ... until that barrier's phase moves past this one
    bool done = false;
};
struct Block {
    Bar all;
    std::vector<Bar> warps;
    std::vector<uint64_t> exchange;
    std::vector<Fiber> fibers;
    fiber::Context scheduler;
    void (*body)(void*) = nullptr;  // the kernel's call, and its closure
    void* closure = nullptr;
};
inline Block* block = nullptr;
inline thread_local unsigned tid = 0;

// The running fiber arrives at `b`; unless it is the last, it waits (back to the scheduler).
inline void arrive(Bar& b) {
    if (++b.arrived == b.expected) {
        b.release();
        return;
    }
    Fiber& f = block->fibers[tid];
    f.waits = &b;
    f.phase = b.phase;
    fiber::swap(f.ctx, block->scheduler);
}

// A returning thread stops counting on `b` (std::barrier's arrive_and_drop, as an exited thread
// stops counting on a GPU): the phase ends if every member left has arrived.
inline void drop(Bar& b) {
    b.expected--;
    if (b.arrived > 0 && b.arrived == b.expected) b.release();
}
}  // namespace emu

inline void __syncthreads() { emu::arrive(emu::block->all); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::arrive(emu::block->warps[emu::tid / 32]); }

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
// A fiber's life: the kernel's body, then it leaves its barriers and hands back to the
// scheduler for good (a finished fiber is never resumed; the next block prepares it afresh).
inline void entry() {
    block->body(block->closure);
    Fiber& f = block->fibers[tid];
    f.done = true;
    drop(block->warps[tid / 32]);
    drop(block->all);
    fiber::swap(f.ctx, block->scheduler);
}

// Runs `body` as the kernel over the grid, a block at a time, blockDim.x threads a block (a
// multiple of 32): each pass of the scheduler resumes every fiber not waiting at an unfinished
// barrier, in thread order in even blocks and in reverse in odd ones, so that a read of another
// thread's write with no barrier between sees the stale value whichever of the two is lower (one
// order alone hides half such races); a pass that resumes none while some have not returned is a
// deadlock.
template <class F>
void run(uint3 grid, unsigned threads, F body) {
    unsigned warps = (threads + 31) / 32;
    Block b;
    b.exchange.assign(threads, 0);
    b.fibers.resize(threads);
    b.warps.resize(warps);
    b.body = [](void* c) { (*static_cast<F*>(c))(); };
    b.closure = &body;
    block = &b;
    blockDim = {threads, 1, 1};
    gridDim = grid;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                blockIdx = {x, y, z};
                b.all = Bar{threads, 0, 0};
                for (auto& w : b.warps) w = Bar{32, 0, 0};
                for (unsigned t = 0; t < threads; t++) {
                    Fiber& f = b.fibers[t];
                    f = Fiber{};
                    fiber::prepare(f.ctx, fiber::stack(t), fiber::STACK_BYTES, entry);
                }
                bool reverse = (x + y + z) % 2 == 1;
                for (unsigned live = threads; live > 0;) {
                    bool moved = false;
                    for (unsigned k = 0; k < threads; k++) {
                        unsigned t = reverse ? threads - 1 - k : k;
                        Fiber& f = b.fibers[t];
                        if (f.done || (f.waits && f.waits->phase == f.phase)) continue;
                        f.waits = nullptr;
                        threadIdx = {t, 0, 0};
                        tid = t;
                        moved = true;
                        fiber::swap(b.scheduler, f.ctx);
                        live -= f.done;
                    }
                    if (!moved) {
                        std::fprintf(stderr,
                                     "emulate.h: block (%u, %u, %u) of %u threads deadlocks: "
                                     "%u wait at barriers that can no longer complete\n",
                                     x, y, z, threads, live);
                        std::abort();
                    }
                }
            }
    block = nullptr;
}
}  // namespace emu
