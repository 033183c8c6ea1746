//! Process-wide settings the `condenser` binary applies at start (a library user decides for
//! their own process).

/// Keep large tensor buffers in the malloc heap. glibc serves blocks over 32 MB with fresh mmap
/// pages and unmaps them on free, so every attention-sized temporary (100 MB at 256 tokens) costs
/// ~25k page faults: on Cranfield that was a third of the run in system time.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only adjusts allocator thresholds; called before any threads allocate.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TOP_PAD, 64 << 20);
    }
}
