// The CPU emulation behind cuda_emu.h: blocks in sequence, each block's
// threads as ucontext coroutines that switch at barriers (see the header).
#include "cuda/emu/cuda_emu.h"

#include <ucontext.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace conform::cuda::emu {

namespace {

constexpr size_t kStackBytes = 256 * 1024;  // per emulated thread; kernels keep small register arrays
constexpr size_t kStaticSmemLimit = 48 * 1024;  // dynamic shared memory above this needs the opt-in attribute

enum class Wait { none, block_barrier, warp_barrier, done };

struct Thread {
    ucontext_t ctx{};
    Indices idx{};
    Wait wait = Wait::none;
    int vote = 0;
    uint64_t posted = 0;   // the value this lane offers in the current shuffle round
    int want_lane = 0;     // the lane whose value it takes
    uint64_t got = 0;
};

struct Block {
    std::vector<Thread> threads;
    std::vector<std::vector<char>> stacks;
    std::vector<unsigned char> smem;
    ucontext_t scheduler{};
    size_t current = 0;
    const std::function<void()>* body = nullptr;
    int vote_result = 0;
};

Block* g_block = nullptr;
cudaError_t g_last_error = cudaSuccess;
std::map<const void*, int> g_smem_optin;  // kernel -> opted-in dynamic shared memory

Thread& self() { return g_block->threads[g_block->current]; }

void yield_to_scheduler() { swapcontext(&self().ctx, &g_block->scheduler); }

void thread_main() {
    (*g_block->body)();
    self().wait = Wait::done;
    // Never resumed again: the scheduler skips finished threads.
    swapcontext(&self().ctx, &g_block->scheduler);
}

struct Divergence : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Runs one block to completion. Throws Divergence when the live threads can
// never all meet (a barrier some thread skips: undefined behaviour on a GPU).
void run_block(Block& b) {
    const size_t n = b.threads.size();
    const size_t warps = (n + 31) / 32;
    for (size_t i = 0; i < n; ++i) {
        Thread& t = b.threads[i];
        t.wait = Wait::none;
        getcontext(&t.ctx);
        t.ctx.uc_stack.ss_sp = b.stacks[i].data();
        t.ctx.uc_stack.ss_size = b.stacks[i].size();
        t.ctx.uc_link = nullptr;
        makecontext(&t.ctx, thread_main, 0);
    }
    for (;;) {
        bool ran = false;
        for (size_t i = 0; i < n; ++i) {
            if (b.threads[i].wait != Wait::none) continue;
            b.current = i;
            swapcontext(&b.scheduler, &b.threads[i].ctx);
            ran = true;
        }
        size_t live = 0, at_block = 0;
        int vote = 0;
        for (const Thread& t : b.threads) {
            if (t.wait == Wait::done) continue;
            ++live;
            if (t.wait == Wait::block_barrier) ++at_block, vote |= t.vote;
        }
        if (live == 0) return;
        bool released = false;
        if (at_block == live) {
            b.vote_result = vote;
            for (Thread& t : b.threads)
                if (t.wait == Wait::block_barrier) t.wait = Wait::none;
            released = true;
        }
        for (size_t w = 0; w < warps; ++w) {
            const size_t lo = w * 32, hi = std::min(n, lo + 32);
            size_t lanes_live = 0, lanes_waiting = 0;
            for (size_t i = lo; i < hi; ++i) {
                if (b.threads[i].wait == Wait::done) continue;
                ++lanes_live;
                if (b.threads[i].wait == Wait::warp_barrier) ++lanes_waiting;
            }
            if (lanes_live == 0 || lanes_waiting != lanes_live) continue;
            if (lanes_live != hi - lo)
                throw Divergence("a warp shuffle with exited lanes (warp " + std::to_string(w) + ")");
            for (size_t i = lo; i < hi; ++i) {
                Thread& t = b.threads[i];
                t.got = b.threads[lo + static_cast<size_t>(t.want_lane)].posted;
                t.wait = Wait::none;
            }
            released = true;
        }
        if (!ran && !released)
            throw Divergence("threads wait at barriers the others never reach (" + std::to_string(at_block) + " of " +
                             std::to_string(live) + " live threads at __syncthreads)");
    }
}

}  // namespace

const Indices& here() { return self().idx; }

unsigned char* dynamic_shared() { return g_block->smem.data(); }

void syncthreads() {
    self().wait = Wait::block_barrier;
    self().vote = 0;
    yield_to_scheduler();
}

int syncthreads_or(int predicate) {
    self().wait = Wait::block_barrier;
    self().vote = predicate != 0;
    yield_to_scheduler();
    return g_block->vote_result;
}

uint64_t warp_exchange(uint64_t mine, int src_lane) {
    Thread& t = self();
    t.posted = mine;
    t.want_lane = src_lane;
    t.wait = Wait::warp_barrier;
    yield_to_scheduler();
    return self().got;
}

int run(const void* kernel_id, dim3 grid, dim3 block, size_t dynamic_smem, std::function<void()> body) {
    const size_t threads = static_cast<size_t>(block.x) * block.y * block.z;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 || threads > 1024 || block.z > 64 ||
        grid.y > 65535 || grid.z > 65535)
        return g_last_error = cudaErrorInvalidConfiguration;
    if (dynamic_smem > kStaticSmemLimit) {
        auto it = g_smem_optin.find(kernel_id);
        if (it == g_smem_optin.end() || static_cast<size_t>(it->second) < dynamic_smem)
            return g_last_error = cudaErrorInvalidValue;  // the GPU refuses the launch the same way
    }
    static Block b;  // stacks reused across launches
    if (g_block) throw std::logic_error("emulated kernel launched from inside a kernel");
    b.threads.assign(threads, Thread{});
    while (b.stacks.size() < threads) b.stacks.emplace_back(kStackBytes);
    b.smem.assign(dynamic_smem + 16, 0xA5);  // never zero: real shared memory starts undefined
    b.body = &body;
    g_block = &b;
    try {
        for (unsigned bz = 0; bz < grid.z; ++bz)
            for (unsigned by = 0; by < grid.y; ++by)
                for (unsigned bx = 0; bx < grid.x; ++bx) {
                    size_t i = 0;
                    for (unsigned tz = 0; tz < block.z; ++tz)
                        for (unsigned ty = 0; ty < block.y; ++ty)
                            for (unsigned tx = 0; tx < block.x; ++tx, ++i) {
                                Indices& ix = b.threads[i].idx;
                                ix.thread = {tx, ty, tz};
                                ix.block = {bx, by, bz};
                                ix.block_dim = block;
                                ix.grid_dim = grid;
                            }
                    std::fill(b.smem.begin(), b.smem.end(), 0xA5);
                    run_block(b);
                }
    } catch (const Divergence& e) {
        g_block = nullptr;
        std::fprintf(stderr, "cuda emulation: %s\n", e.what());
        return g_last_error = cudaErrorLaunchFailure;
    }
    g_block = nullptr;
    return cudaSuccess;
}

}  // namespace conform::cuda::emu

// ---- runtime API ------------------------------------------------------------------------------

using conform::cuda::emu::g_last_error;

const char* cudaGetErrorString(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "no error";
        case cudaErrorInvalidValue: return "invalid argument";
        case cudaErrorMemoryAllocation: return "out of memory";
        case cudaErrorInvalidConfiguration: return "invalid configuration argument";
        case cudaErrorNoDevice: return "no CUDA-capable device is detected";
        case cudaErrorLaunchFailure: return "unspecified launch failure";
    }
    return "unknown error";
}
const char* cudaGetErrorName(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "cudaSuccess";
        case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
        case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
        case cudaErrorNoDevice: return "cudaErrorNoDevice";
        case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    }
    return "cudaErrorUnknown";
}
cudaError_t cudaGetLastError() {
    const cudaError_t e = g_last_error;
    g_last_error = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError() { return g_last_error; }

cudaError_t cudaGetDeviceCount(int* n) {
    *n = 1;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int* d) {
    *d = 0;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidValue; }
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
    if (d != 0) return cudaErrorInvalidValue;
    *p = cudaDeviceProp{};
    std::snprintf(p->name, sizeof p->name, "CPU emulation (conform impls/cuda/emu)");
    return cudaSuccess;
}
cudaError_t cudaMalloc(void** p, size_t bytes) {
    // Exactly the size asked for, so AddressSanitizer builds catch an access past it.
    *p = std::malloc(bytes == 0 ? 1 : bytes);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void* p) {
    std::free(p);
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
    if (bytes) std::memmove(dst, src, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
    return cudaMemcpy(dst, src, bytes, kind);
}
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t) {
    std::memset(dst, value, bytes);
    return cudaSuccess;
}

struct CUstream_emu {};
struct CUevent_emu {
    std::chrono::steady_clock::time_point t;
};
cudaError_t cudaStreamCreate(cudaStream_t* s) {
    *s = new CUstream_emu;
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) { return cudaStreamCreate(s); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    delete s;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
cudaError_t cudaEventCreate(cudaEvent_t* e) {
    *e = new CUevent_emu;
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) {
    e->t = std::chrono::steady_clock::now();
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
    *ms = std::chrono::duration<float, std::milli>(b->t - a->t).count();
    return cudaSuccess;
}
cudaError_t emu_func_set_attribute(const void* kernel, cudaFuncAttribute attr, int value) {
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || value > 227 * 1024)
        return cudaErrorInvalidValue;
    conform::cuda::emu::g_smem_optin[kernel] = value;
    return cudaSuccess;
}

// ---- cuBLAS ---------------------------------------------------------------------------------

struct cublasContext_emu {};

cublasStatus_t cublasCreate(cublasHandle_t* h) {
    *h = new cublasContext_emu;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t h) {
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
const char* cublasGetStatusString(cublasStatus_t s) {
    switch (s) {
        case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
        case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    }
    return "unknown cuBLAS status";
}

namespace {

float load_as_float(const void* base, cudaDataType t, size_t i) {
    switch (t) {
        case CUDA_R_32F: return static_cast<const float*>(base)[i];
        case CUDA_R_16BF: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
        case CUDA_R_16F: return __half2float(static_cast<const __half*>(base)[i]);
    }
    return 0;
}
void store_from_float(void* base, cudaDataType t, size_t i, float v) {
    switch (t) {
        case CUDA_R_32F: static_cast<float*>(base)[i] = v; return;
        case CUDA_R_16BF: static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16(v); return;
        case CUDA_R_16F: static_cast<__half*>(base)[i] = __float2half(v); return;
    }
}

}  // namespace

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void* alpha, const void* A, cudaDataType at, int lda, const void* B,
                            cudaDataType bt, int ldb, const void* beta, void* C, cudaDataType ct, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (compute != CUBLAS_COMPUTE_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
    // Leading dimensions as cuBLAS checks them.
    if (lda < std::max(1, ta == CUBLAS_OP_N ? m : k) || ldb < std::max(1, tb == CUBLAS_OP_N ? k : n) ||
        ldc < std::max(1, m))
        return CUBLAS_STATUS_INVALID_VALUE;
    const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
            float acc = 0;
            for (int p = 0; p < k; ++p) {
                const size_t ai = ta == CUBLAS_OP_N ? static_cast<size_t>(i) + static_cast<size_t>(p) * lda
                                                    : static_cast<size_t>(p) + static_cast<size_t>(i) * lda;
                const size_t bi = tb == CUBLAS_OP_N ? static_cast<size_t>(p) + static_cast<size_t>(j) * ldb
                                                    : static_cast<size_t>(j) + static_cast<size_t>(p) * ldb;
                acc += load_as_float(A, at, ai) * load_as_float(B, bt, bi);
            }
            const size_t ci = static_cast<size_t>(i) + static_cast<size_t>(j) * ldc;
            float c = a * acc;
            if (b != 0) c += b * load_as_float(C, ct, ci);
            store_from_float(C, ct, ci, c);
        }
    return CUBLAS_STATUS_SUCCESS;
}
