"""Compile a CUDA source with NVRTC, as condenser does at run time, and fail with NVRTC's log.
    python3 scripts/nvrtc-check.py LIBNVRTC SOURCE [ARCH]   # e.g. .cuda/toolkit/lib/libnvrtc.so.13
(scripts/build-cuda.sh runs it on the GPU engine's kernels: a source nvcc takes may still use
something NVRTC lacks, such as a header or math.h's INFINITY.)"""
import ctypes
import sys

lib = ctypes.CDLL(sys.argv[1])
source = open(sys.argv[2], "rb").read()
arch = sys.argv[3] if len(sys.argv) > 3 else "90"
prog = ctypes.c_void_p()
rc = lib.nvrtcCreateProgram(ctypes.byref(prog), source, sys.argv[2].encode(), 0, None, None)
if rc != 0:
    sys.exit(f"nvrtcCreateProgram: error {rc}")
opts = [f"--gpu-architecture=compute_{arch}".encode()]
rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
size = ctypes.c_size_t()
lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
log = ctypes.create_string_buffer(size.value)
lib.nvrtcGetProgramLog(prog, log)
if rc != 0:
    sys.exit(f"NVRTC failed on {sys.argv[2]} (error {rc}):\n{log.value.decode()}")
print(f"NVRTC compiled {sys.argv[2]} for compute_{arch}")
