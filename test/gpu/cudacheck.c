/* Loads the GPU driver the way a CUDA job and slurmd's NVML users do: by soname through the
 * dynamic loader, then asks each library how many GPUs it sees and what they are. */
#include <dlfcn.h>
#include <stdio.h>

typedef int (*cu_init_t)(unsigned int);
typedef int (*cu_count_t)(int *);
typedef int (*cu_dev_t)(int *, int);
typedef int (*cu_name_t)(char *, int, int);
typedef int (*nvml_init_t)(void);
typedef int (*nvml_count_t)(unsigned int *);
typedef int (*nvml_version_t)(char *, unsigned int);

int main(void) {
	int failed = 0;
	void *cu = dlopen("libcuda.so.1", RTLD_NOW);
	if (!cu) {
		printf("libcuda.so.1: %s\n", dlerror());
		failed = 1;
	} else {
		cu_init_t init = (cu_init_t)dlsym(cu, "cuInit");
		cu_count_t count = (cu_count_t)dlsym(cu, "cuDeviceGetCount");
		cu_dev_t dev = (cu_dev_t)dlsym(cu, "cuDeviceGet");
		cu_name_t name = (cu_name_t)dlsym(cu, "cuDeviceGetName");
		int rc = init(0), n = 0;
		if (rc == 0) rc = count(&n);
		printf("cuda: rc=%d devices=%d\n", rc, n);
		for (int i = 0; rc == 0 && i < n; i++) {
			int d;
			char buf[256];
			if (dev(&d, i) == 0 && name(buf, sizeof buf, d) == 0) printf("cuda: device %d: %s\n", i, buf);
		}
		failed |= rc != 0 || n == 0;
	}
	void *nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	if (!nvml) {
		printf("libnvidia-ml.so.1: %s\n", dlerror());
		return 1;
	}
	nvml_init_t ninit = (nvml_init_t)dlsym(nvml, "nvmlInit_v2");
	nvml_count_t ncount = (nvml_count_t)dlsym(nvml, "nvmlDeviceGetCount_v2");
	nvml_version_t nver = (nvml_version_t)dlsym(nvml, "nvmlSystemGetDriverVersion");
	unsigned int nn = 0;
	char ver[96] = "";
	int rc = ninit();
	if (rc == 0) rc = ncount(&nn);
	if (rc == 0) nver(ver, sizeof ver);
	printf("nvml: rc=%d devices=%u driver=%s\n", rc, nn, ver);
	return failed || rc != 0 || nn == 0;
}
