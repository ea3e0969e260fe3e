/* A stand-in for NVIDIA's libnvidia-ml.so.1, built as that name for the NVML test (issue 54): this machine has no
 * NVIDIA GPU or driver, so the real library cannot exist here. It exports the calls fanout-rank makes, with NVML's
 * signatures (nvml.h), and answers figures the test knows exactly: device i holds (i + 1) GiB in use; each energy
 * reading of a device adds 2500 mJ to its counter (so a role's two readings, at its start and end, differ by 2.5 J);
 * the device "GPU-nosuch" does not exist; device 9 has no energy counter (NVML_ERROR_NOT_SUPPORTED). */
#include <string.h>

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { int index; } device_t;
static device_t devices[16];
static unsigned long long energy[16];

int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
const char* nvmlErrorString(int rc) { return rc == 3 ? "Not Supported" : rc == 2 ? "Invalid Argument" : "Unknown Error"; }
int nvmlDeviceGetHandleByIndex_v2(unsigned index, device_t** d) {
  if (index >= 16) return 2;
  devices[index].index = (int)index;
  *d = &devices[index];
  return 0;
}
int nvmlDeviceGetHandleByUUID(const char* uuid, device_t** d) {
  if (strncmp(uuid, "GPU-standin-", 12) != 0) return 2;
  return nvmlDeviceGetHandleByIndex_v2((unsigned)(uuid[12] - '0'), d);
}
int nvmlDeviceGetMemoryInfo(device_t* d, nvmlMemory_t* m) {
  m->total = 16ULL << 30;
  m->used = (unsigned long long)(d->index + 1) << 30;
  m->free = m->total - m->used;
  return 0;
}
int nvmlDeviceGetTotalEnergyConsumption(device_t* d, unsigned long long* mj) {
  if (d->index == 9) return 3;
  energy[d->index] += 2500;
  *mj = energy[d->index];
  return 0;
}
