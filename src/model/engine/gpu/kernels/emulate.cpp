// The GPU engine's kernels (engine/) on the CPU (emulate.h), for emulated.rs's tests: `emu_launch` runs a kernel by name
// with its arguments as cuLaunchKernel takes them (an array of pointers to each argument).
#include "emulate.h"
#include "common.cuh"
#include "rows.cu"
#include "attention.cu"
#include "heads.cu"
#include "optim.cu"
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

template <class... A, std::size_t... I>
static void call(void (*k)(A...), void** args, std::index_sequence<I...>) {
    k(*static_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(args[I])...);
}

template <class... A>
static void launch(void (*k)(A...), uint3 grid, unsigned threads, void** args) {
    emu::run(grid, threads, [&] { call(k, args, std::index_sequence_for<A...>{}); });
}

// every extern "C" __global__ of engine/ (emulated.rs checks the list against the source)
#define KERNELS(X)                                                                             \
    X(embed_forward)                                                                           \
    X(residual_norm)                                                                           \
    X(residual_norm_backward)                                                                  \
    X(column_sums)                                                                             \
    X(bias_gelu)                                                                               \
    X(gelu_backward)                                                                           \
    X(embed_scatter)                                                                           \
    X(pad_rows)                                                                                \
    X(unpad_rows)                                                                              \
    X(to_bf16)                                                                                 \
    X(attention_forward_32)                                                                    \
    X(attention_backward_32)                                                                   \
    X(attention_forward_64)                                                                    \
    X(attention_backward_64)                                                                   \
    X(pool_rows)                                                                               \
    X(pool_rows_backward)                                                                      \
    X(normalize_rows)                                                                          \
    X(normalize_rows_backward)                                                                 \
    X(ranking_rows)                                                                            \
    X(adamw_slots)                                                                             \
    X(sum_squares_slots)                                                                       \
    X(sum_all)

extern "C" const char* emu_kernels() {
#define NAME(k) #k " "
    return KERNELS(NAME);
#undef NAME
}

// 0 when it ran, -1 for a name the kernels do not have
extern "C" int emu_launch(const char* name, unsigned gx, unsigned gy, unsigned gz, unsigned threads,
                          void** args) {
    // one launch at a time in the process: a block's shared arrays and barriers are globals, and
    // tests call from several threads
    static std::mutex one;
    std::lock_guard<std::mutex> hold(one);
    std::string n(name);
    uint3 grid{gx, gy, gz};
#define RUN(k)                                                                                 \
    if (n == #k) {                                                                             \
        launch(k, grid, threads, args);                                                        \
        return 0;                                                                              \
    }
    KERNELS(RUN)
#undef RUN
    return -1;
}
