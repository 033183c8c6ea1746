// Fibers for emulate.h: a CUDA thread of an emulated block is a stack and a saved context, run
// on the launching OS thread until it switches back to the scheduler. On x86-64 a switch saves
// the callee-saved registers and the FP control words and swaps stack pointers (a few ns); glibc's
// swapcontext also saves the signal mask, a system call per switch, which was a third of an
// emulated training step's time. Elsewhere ucontext serves.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sys/mman.h>
#include <vector>

namespace fiber {

#if defined(__x86_64__)
struct Context {
    void* sp = nullptr;
};

// switch_stacks(from, to): push rbp, rbx, r12-r15 and MXCSR/x87 control words, store rsp in
// *from, load `to`, pop the same from there and return into the other fiber. Hidden: the
// emulated library's own symbol.
extern "C" void emu_switch_stacks(void** from, void* to);
asm(R"(
    .text
    .globl emu_switch_stacks
    .hidden emu_switch_stacks
    .type emu_switch_stacks, @function
emu_switch_stacks:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch_stacks, .-emu_switch_stacks
)");

// Make `c` start `entry` on the stack [base, base + size) at its first switch: the frame
// emu_switch_stacks pops (control words as now, six zeroed registers), then `entry` as the return
// address, above it a null one (entry never returns), rsp = 8 mod 16 at entry as the ABI wants.
inline void prepare(Context& c, char* base, size_t size, void (*entry)()) {
    auto top = reinterpret_cast<uintptr_t>(base + size) & ~uintptr_t(15);
    auto* w = reinterpret_cast<uint64_t*>(top);
    *--w = 0;
    *--w = reinterpret_cast<uint64_t>(entry);
    for (int r = 0; r < 6; r++) *--w = 0;
    uint32_t mxcsr;
    uint16_t fcw;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fcw));
    *--w = uint64_t(mxcsr) | (uint64_t(fcw) << 32);
    c.sp = w;
}

inline void swap(Context& from, Context& to) { emu_switch_stacks(&from.sp, to.sp); }
#else
}  // namespace fiber
#include <ucontext.h>
namespace fiber {
struct Context {
    ucontext_t uc;
};

inline void prepare(Context& c, char* base, size_t size, void (*entry)()) {
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = base;
    c.uc.uc_stack.ss_size = size;
    c.uc.uc_link = nullptr;  // entry never returns
    makecontext(&c.uc, entry, 0);
}

inline void swap(Context& from, Context& to) { swapcontext(&from.uc, &to.uc); }
#endif

// A fiber's stack: 256 KB.
inline constexpr size_t STACK_BYTES = 256 * 1024;

// Stack `t` (its lowest address), made at its first use and kept for the process (launches run
// one at a time: emulate.cpp's lock), above a guard page: an overflow faults instead of writing
// into another fiber's stack.
inline char* stack(unsigned t) {
    static std::vector<char*> stacks;
    const size_t page = 4096;
    while (stacks.size() <= t) {
        void* m = mmap(nullptr, STACK_BYTES + page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED || mprotect(m, page, PROT_NONE) != 0) {
            std::perror("fiber.h: a fiber's stack");
            std::abort();
        }
        stacks.push_back(static_cast<char*>(m) + page);
    }
    return stacks[t];
}
}  // namespace fiber
