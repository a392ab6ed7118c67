// gpu_bench: the CUDA numbers of bench/gpu.sh that need no mount.
// P = pinned host-to-device cudaMemcpyAsync peak (64 MiB x 16), the
// device-to-device copy bandwidth, and each kernel of libcolabfs-gpu
// (normalise, gather, crc32c) as bytes moved per second.  Prints "name value"
// lines (GB/s).  Built by bench/gpu.sh with nvcc against libcolabfs-gpu.so.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "gpuops.h"

#define CK(x)                                                                         \
	do {                                                                          \
		cudaError_t e_ = (x);                                                 \
		if (e_ != cudaSuccess) {                                              \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,     \
				cudaGetErrorString(e_));                              \
			exit(1);                                                      \
		}                                                                     \
	} while (0)

static float ms_between(cudaEvent_t a, cudaEvent_t b)
{
	float ms = 0;
	CK(cudaEventElapsedTime(&ms, a, b));
	return ms;
}

int main()
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
		printf("no CUDA device: nothing measured\n");
		return 0;
	}
	const size_t MB64 = 64u << 20;
	cudaStream_t st;
	cudaEvent_t a, b;
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	void *h, *d, *d2;
	CK(cudaHostAlloc(&h, MB64, cudaHostAllocPortable));
	memset(h, 1, MB64);
	CK(cudaMalloc(&d, MB64 * 16));
	CK(cudaMalloc(&d2, MB64 * 16));
	// P: pinned H2D, 64 MiB x 16, best of 3
	double p = 0;
	for (int rep = 0; rep < 3; rep++) {
		CK(cudaEventRecord(a, st));
		for (int i = 0; i < 16; i++)
			CK(cudaMemcpyAsync((char *)d + i * MB64, h, MB64, cudaMemcpyHostToDevice, st));
		CK(cudaEventRecord(b, st));
		CK(cudaEventSynchronize(b));
		double gbs = 16.0 * MB64 / (ms_between(a, b) * 1e6);
		if (gbs > p)
			p = gbs;
	}
	printf("pinned_h2d_GBps %.2f\n", p);
	// device-to-device copy of 1 GiB: bytes read + written
	double dd = 0;
	for (int rep = 0; rep < 3; rep++) {
		CK(cudaEventRecord(a, st));
		CK(cudaMemcpyAsync(d2, d, MB64 * 16, cudaMemcpyDeviceToDevice, st));
		CK(cudaEventRecord(b, st));
		CK(cudaEventSynchronize(b));
		double gbs = 2.0 * 16 * MB64 / (ms_between(a, b) * 1e6);
		if (gbs > dd)
			dd = gbs;
	}
	printf("d2d_copy_GBps %.2f\n", dd);
	// normalise: 256 images 224x224x3 uint8 -> float32 (1 byte read, 4 written)
	const uint32_t N = 256, H = 224, W = 224, C = 3;
	float mean[3] = { 0.485f, 0.456f, 0.406f }, sd[3] = { 0.229f, 0.224f, 0.225f };
	double nb = 0;
	for (int rep = 0; rep < 5; rep++) {
		CK(cudaEventRecord(a, st));
		if (cfs_normalize_cuda((const uint8_t *)d, d2, N, H, W, C, mean, sd, 0, st)) {
			fprintf(stderr, "normalize failed\n");
			return 1;
		}
		CK(cudaEventRecord(b, st));
		CK(cudaEventSynchronize(b));
		double gbs = (double)N * H * W * C * 5 / (ms_between(a, b) * 1e6);
		if (gbs > nb)
			nb = gbs;
	}
	printf("normalize_GBps %.2f\n", nb);
	// gather: 4096 records of 1..64 KiB into [4096, 64 KiB]
	const uint32_t R = 4096, MAXL = 64 << 10;
	std::vector<uint64_t> offs(R);
	std::vector<uint32_t> lens(R);
	uint64_t at = 0, moved = 0;
	for (uint32_t i = 0; i < R; i++) {
		lens[i] = 1024 + (uint32_t)((i * 2654435761u) % (MAXL - 1024));
		offs[i] = at;
		at += lens[i];
		moved += lens[i] + MAXL;
	}
	void *d_offs, *d_lens, *d_out, *d_outl;
	CK(cudaMalloc(&d_offs, R * 8));
	CK(cudaMalloc(&d_lens, R * 4));
	CK(cudaMalloc(&d_outl, R * 4));
	CK(cudaMalloc(&d_out, (size_t)R * MAXL));
	CK(cudaMemcpy(d_offs, offs.data(), R * 8, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(d_lens, lens.data(), R * 4, cudaMemcpyHostToDevice));
	double gb = 0;
	for (int rep = 0; rep < 5; rep++) {
		CK(cudaEventRecord(a, st));
		if (cfs_gather_cuda((const uint8_t *)d, (const uint64_t *)d_offs,
				    (const uint32_t *)d_lens, R, MAXL, 1, 0, (uint8_t *)d_out,
				    (uint32_t *)d_outl, st)) {
			fprintf(stderr, "gather failed\n");
			return 1;
		}
		CK(cudaEventRecord(b, st));
		CK(cudaEventSynchronize(b));
		double gbs = (double)moved / (ms_between(a, b) * 1e6);
		if (gbs > gb)
			gb = gbs;
	}
	printf("gather_GBps %.2f\n", gb);
	// crc32c of 256 blocks of 4 MiB (bytes read)
	const uint32_t B = 256, BL = 4u << 20;
	for (uint32_t i = 0; i < B; i++) {
		offs[i] = (uint64_t)i * BL;
		lens[i] = BL;
	}
	CK(cudaMemcpy(d_offs, offs.data(), B * 8, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(d_lens, lens.data(), B * 4, cudaMemcpyHostToDevice));
	double cb = 0;
	for (int rep = 0; rep < 5; rep++) {
		CK(cudaEventRecord(a, st));
		if (cfs_crc32c_batch_cuda((const uint8_t *)d, (const uint64_t *)d_offs,
					  (const uint32_t *)d_lens, B, (uint32_t *)d_outl, st)) {
			fprintf(stderr, "crc32c failed\n");
			return 1;
		}
		CK(cudaEventRecord(b, st));
		CK(cudaEventSynchronize(b));
		double gbs = (double)B * BL / (ms_between(a, b) * 1e6);
		if (gbs > cb)
			cb = gbs;
	}
	printf("crc32c_GBps %.2f\n", cb);
	return 0;
}
