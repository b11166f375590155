// Linked into every CUDA extension jitload builds (see jitload/swap.py): lets a freshly compiled copy of the
// extension's kernels replace the loaded ones in place, without reloading the extension.
//
// The link line wraps the CUDA runtime entry points below (-Wl,--wrap=SYMBOL), so only this extension's
// calls pass through here; torch's own launches never do.
//   - __cudaRegisterFunction runs from the extension's static initialisers, once per kernel: it pairs the
//     kernel's host stub with its mangled device name.
//   - In CUDA 12.8+ a <<<>>> launch fetches a cudaKernel_t once per call site (__cudaGetKernel, cached in a
//     static) and launches it through __cudaLaunchKernel(_ptsz). Older toolkits, and -D__NV_LEGACY_LAUNCH,
//     call cudaLaunchKernel with the stub. Every entry point that takes a kernel maps it to the newest one.
// jitload_swap_load() loads a fatbin (cudaLibraryLoadData), looks up each named kernel in it and, only when
// every one is there, redirects the stubs and their original handles to the new kernels. Libraries are never
// unloaded: a CUDA graph captured before a swap keeps replaying the kernels it captured.
//
// Hand-written because nothing in torch or the CUDA toolkit redirects a compiled <<<>>> launch.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#define JITLOAD_EXPORT extern "C" __attribute__((visibility("default")))
#define JITLOAD_WRAP extern "C" __attribute__((visibility("hidden")))

extern "C" {
void __real___cudaRegisterFunction(void** fatCubinHandle, const char* hostFun, char* deviceFun,
                                   const char* deviceName, int thread_limit, uint3* tid, uint3* bid, dim3* bDim,
                                   dim3* gDim, int* wSize);
cudaError_t __real___cudaLaunchKernel(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t __real___cudaLaunchKernel_ptsz(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t __real_cudaLaunchKernel(const void*, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t __real_cudaLaunchKernel_ptsz(const void*, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t __real_cudaLaunchKernelExC(const cudaLaunchConfig_t*, const void*, void**);
cudaError_t __real_cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t*, const void*, void**);
cudaError_t __real_cudaLaunchCooperativeKernel(const void*, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t __real_cudaLaunchCooperativeKernel_ptsz(const void*, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t __real_cudaFuncGetAttributes(cudaFuncAttributes*, const void*);
cudaError_t __real_cudaFuncSetAttribute(const void*, cudaFuncAttribute, int);
cudaError_t __real_cudaOccupancyMaxActiveBlocksPerMultiprocessor(int*, const void*, int, size_t);
cudaError_t __real_cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int*, const void*, int, size_t,
                                                                         unsigned int);
cudaError_t __real_cudaOccupancyAvailableDynamicSMemPerBlock(size_t*, const void*, int, int);
}

namespace {

struct Table {
  std::mutex mu;
  std::vector<std::pair<const void*, std::string>> kernels;  // stub, mangled device name; registration order
  std::unordered_map<const void*, cudaKernel_t> by_stub;     // stub -> newest kernel
  std::unordered_map<const void*, cudaKernel_t> by_handle;   // first handle of a stub -> newest kernel
  std::unordered_map<const void*, std::vector<std::pair<cudaFuncAttribute, int>>> attributes;  // set by the host
  int swaps = 0;
};

// Registration runs from static initialisers, possibly before this file's own globals are constructed: the
// table lives behind a function-local static, and is never destroyed (a launch may come during exit).
Table& table() {
  static Table* t = new Table();
  return *t;
}

// Constant-initialised, so it is valid before any constructor runs: launches skip the lock until a swap.
std::atomic<bool> swapped{false};

cudaKernel_t newest_handle(cudaKernel_t kernel) {
  if (!swapped.load(std::memory_order_acquire)) return kernel;
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.by_handle.find(reinterpret_cast<const void*>(kernel));
  return it == t.by_handle.end() ? kernel : it->second;
}

const void* newest_func(const void* func) {
  if (!swapped.load(std::memory_order_acquire)) return func;
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.by_stub.find(func);
  if (it != t.by_stub.end()) return reinterpret_cast<const void*>(it->second);
  auto ih = t.by_handle.find(func);  // a handle from cudaGetKernel, passed where a function is expected
  return ih == t.by_handle.end() ? func : reinterpret_cast<const void*>(ih->second);
}

void set_error(char* error, size_t size, const std::string& text) {
  if (error && size) std::snprintf(error, size, "%s", text.c_str());
}

}  // namespace

JITLOAD_WRAP void __wrap___cudaRegisterFunction(void** fatCubinHandle, const char* hostFun, char* deviceFun,
                                                const char* deviceName, int thread_limit, uint3* tid, uint3* bid,
                                                dim3* bDim, dim3* gDim, int* wSize) {
  {
    Table& t = table();
    std::lock_guard<std::mutex> lock(t.mu);
    t.kernels.emplace_back(hostFun, deviceName ? deviceName : "");
  }
  __real___cudaRegisterFunction(fatCubinHandle, hostFun, deviceFun, deviceName, thread_limit, tid, bid, bDim, gDim,
                                wSize);
}

JITLOAD_WRAP cudaError_t __wrap___cudaLaunchKernel(cudaKernel_t k, dim3 g, dim3 b, void** a, size_t s,
                                                   cudaStream_t st) {
  return __real___cudaLaunchKernel(newest_handle(k), g, b, a, s, st);
}
JITLOAD_WRAP cudaError_t __wrap___cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 g, dim3 b, void** a, size_t s,
                                                        cudaStream_t st) {
  return __real___cudaLaunchKernel_ptsz(newest_handle(k), g, b, a, s, st);
}
JITLOAD_WRAP cudaError_t __wrap_cudaLaunchKernel(const void* f, dim3 g, dim3 b, void** a, size_t s,
                                                 cudaStream_t st) {
  return __real_cudaLaunchKernel(newest_func(f), g, b, a, s, st);
}
JITLOAD_WRAP cudaError_t __wrap_cudaLaunchKernel_ptsz(const void* f, dim3 g, dim3 b, void** a, size_t s,
                                                      cudaStream_t st) {
  return __real_cudaLaunchKernel_ptsz(newest_func(f), g, b, a, s, st);
}
JITLOAD_WRAP cudaError_t __wrap_cudaLaunchKernelExC(const cudaLaunchConfig_t* c, const void* f, void** a) {
  return __real_cudaLaunchKernelExC(c, newest_func(f), a);
}
JITLOAD_WRAP cudaError_t __wrap_cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* c, const void* f, void** a) {
  return __real_cudaLaunchKernelExC_ptsz(c, newest_func(f), a);
}
JITLOAD_WRAP cudaError_t __wrap_cudaLaunchCooperativeKernel(const void* f, dim3 g, dim3 b, void** a, size_t s,
                                                            cudaStream_t st) {
  return __real_cudaLaunchCooperativeKernel(newest_func(f), g, b, a, s, st);
}
JITLOAD_WRAP cudaError_t __wrap_cudaLaunchCooperativeKernel_ptsz(const void* f, dim3 g, dim3 b, void** a, size_t s,
                                                                 cudaStream_t st) {
  return __real_cudaLaunchCooperativeKernel_ptsz(newest_func(f), g, b, a, s, st);
}
JITLOAD_WRAP cudaError_t __wrap_cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* f) {
  return __real_cudaFuncGetAttributes(attr, newest_func(f));
}
JITLOAD_WRAP cudaError_t __wrap_cudaFuncSetAttribute(const void* f, cudaFuncAttribute attr, int value) {
  {  // remembered, so that a kernel swapped in later gets the attribute the host code set once
    Table& t = table();
    std::lock_guard<std::mutex> lock(t.mu);
    auto& list = t.attributes[f];
    bool found = false;
    for (auto& entry : list) {
      if (entry.first == attr) entry.second = value, found = true;
    }
    if (!found) list.emplace_back(attr, value);
  }
  return __real_cudaFuncSetAttribute(newest_func(f), attr, value);
}
JITLOAD_WRAP cudaError_t __wrap_cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, const void* f, int b,
                                                                              size_t s) {
  return __real_cudaOccupancyMaxActiveBlocksPerMultiprocessor(n, newest_func(f), b, s);
}
JITLOAD_WRAP cudaError_t __wrap_cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* n, const void* f, int b,
                                                                                       size_t s, unsigned int fl) {
  return __real_cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(n, newest_func(f), b, s, fl);
}
JITLOAD_WRAP cudaError_t __wrap_cudaOccupancyAvailableDynamicSMemPerBlock(size_t* s, const void* f, int n, int b) {
  return __real_cudaOccupancyAvailableDynamicSMemPerBlock(s, newest_func(f), n, b);
}

// ---- called from Python (ctypes), through this library's own handle ----

JITLOAD_EXPORT int jitload_swap_kernel_count() {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  return static_cast<int>(t.kernels.size());
}

JITLOAD_EXPORT const char* jitload_swap_kernel_name(int i) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  return i >= 0 && i < static_cast<int>(t.kernels.size()) ? t.kernels[i].second.c_str() : nullptr;
}

JITLOAD_EXPORT int jitload_swap_count() {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.swaps;
}

// Load `image` (a fatbin or cubin) and send every registered kernel named in `names` to its copy there.
// All or nothing: returns how many stubs now launch new code, or -1 with `error` filled and nothing changed.
// Failed CUDA calls here are cleared with cudaGetLastError, so that the extension's next launch check does not
// report them as its own. Not redirected: cudaFuncSetCacheConfig (it takes no kernel handle) and kernel nodes
// added to a CUDA graph by hand (cudaGraphAddKernelNode) -- both keep the kernel they were given.
JITLOAD_EXPORT int jitload_swap_load(const void* image, const char* const* names, int count, char* error,
                                     size_t error_size) {
  cudaLibrary_t library = nullptr;
  cudaError_t rc = cudaLibraryLoadData(&library, image, nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (rc != cudaSuccess) {
    cudaGetLastError();  // not sticky: leave no error for the extension's next launch check to report
    set_error(error, error_size, std::string("cudaLibraryLoadData: ") + cudaGetErrorString(rc));
    return -1;
  }
  std::unordered_map<std::string, cudaKernel_t> fresh;
  for (int i = 0; i < count; ++i) {
    cudaKernel_t kernel = nullptr;
    rc = cudaLibraryGetKernel(&kernel, library, names[i]);
    if (rc != cudaSuccess) {
      cudaGetLastError();
      set_error(error, error_size, std::string("kernel not in the new code: ") + names[i]);
      return -1;  // the library stays loaded (unloading is not worth the risk); nothing was redirected
    }
    fresh[names[i]] = kernel;
  }
  Table& t = table();
  std::vector<std::pair<const void*, cudaKernel_t>> plan;  // stub -> new kernel
  {
    std::lock_guard<std::mutex> lock(t.mu);
    for (const auto& entry : t.kernels) {
      auto it = fresh.find(entry.second);
      if (it != fresh.end()) plan.emplace_back(entry.first, it->second);
    }
  }
  std::vector<std::pair<const void*, cudaKernel_t>> handles;  // original handle -> new kernel
  for (const auto& step : plan) {
    cudaKernel_t original = nullptr;
    rc = cudaGetKernel(&original, step.first);
    if (rc != cudaSuccess) {
      cudaGetLastError();
      set_error(error, error_size, std::string("cudaGetKernel: ") + cudaGetErrorString(rc));
      return -1;
    }
    handles.emplace_back(reinterpret_cast<const void*>(original), step.second);
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) cudaGetLastError();
  std::lock_guard<std::mutex> lock(t.mu);
  // Attributes the host code set once (by stub or by handle) carry over to the new kernel, on every device.
  auto carry_attributes = [&](const void* key, cudaKernel_t kernel) {
    auto attrs = t.attributes.find(key);
    if (attrs == t.attributes.end()) return;
    for (const auto& a : attrs->second) {
      for (int d = 0; d < devices; ++d) {
        if (cudaKernelSetAttributeForDevice(kernel, a.first, a.second, d) != cudaSuccess) cudaGetLastError();
      }
    }
  };
  for (const auto& step : plan) {
    t.by_stub[step.first] = step.second;
    carry_attributes(step.first, step.second);
  }
  for (const auto& h : handles) {
    t.by_handle[h.first] = h.second;
    carry_attributes(h.first, h.second);
  }
  ++t.swaps;
  swapped.store(true, std::memory_order_release);
  return static_cast<int>(plan.size());
}
