/* A fake NVIDIA driver (libcuda.so.1) for tl_aot's device probe (tl_aot/gpu/cuda_driver.py), no GPU needed.
 *
 * Read from the environment on every call, so one loaded copy serves every test:
 *   FAKE_CUDA_INIT     the CUresult cuInit returns (default 0)
 *   FAKE_CUDA_CCS      the devices' compute capabilities, comma-separated ("90,80"; default none)
 *   FAKE_CUDA_CURRENT  the device of the current context (unset: no context is current)
 *   FAKE_CUDA_NAMES    the devices' model names, comma-separated ("NVIDIA H200,NVIDIA A10"; default "")
 */
#include <stdlib.h>
#include <string.h>

static int ccs(int* out, int max) {
  const char* s = getenv("FAKE_CUDA_CCS");
  int n = 0;
  while (s && *s && n < max) {
    out[n++] = atoi(s);
    s = strchr(s, ',');
    if (s) ++s;
  }
  return n;
}

int cuInit(unsigned flags) {
  (void)flags;
  const char* r = getenv("FAKE_CUDA_INIT");
  return r ? atoi(r) : 0;
}

int cuDeviceGetCount(int* count) {
  int cc[16];
  *count = ccs(cc, 16);
  return 0;
}

int cuDeviceGet(int* device, int ordinal) {
  int cc[16];
  if (ordinal < 0 || ordinal >= ccs(cc, 16)) return 101; /* CUDA_ERROR_INVALID_DEVICE */
  *device = ordinal;
  return 0;
}

int cuDeviceGetAttribute(int* value, int attribute, int device) {
  int cc[16];
  if (device < 0 || device >= ccs(cc, 16)) return 101;
  if (attribute == 75) *value = cc[device] / 10; /* COMPUTE_CAPABILITY_MAJOR */
  else if (attribute == 76) *value = cc[device] % 10; /* COMPUTE_CAPABILITY_MINOR */
  else return 1; /* CUDA_ERROR_INVALID_VALUE */
  return 0;
}

int cuCtxGetCurrent(void** ctx) {
  *ctx = getenv("FAKE_CUDA_CURRENT") ? (void*)0x1 : (void*)0;
  return 0;
}

int cuCtxGetDevice(int* device) {
  const char* d = getenv("FAKE_CUDA_CURRENT");
  if (!d) return 201; /* CUDA_ERROR_INVALID_CONTEXT */
  *device = atoi(d);
  return 0;
}

int cuDeviceGetName(char* name, int len, int device) {
  int cc[16];
  const char* s = getenv("FAKE_CUDA_NAMES");
  if (device < 0 || device >= ccs(cc, 16) || len <= 0) return 101;
  for (int i = 0; s && i < device; ++i) {
    s = strchr(s, ',');
    if (s) ++s;
  }
  int n = 0;
  while (s && s[n] && s[n] != ',' && n < len - 1) {
    name[n] = s[n];
    ++n;
  }
  name[n] = 0;
  return 0;
}
